"""The daemon's HTTP side: the app and its routers (`rest_api`, `job_routes`,
`cluster_routes`, `token_routes`, `watch_routes`), request bodies (`bodies`), errors
(`http_errors`), the listeners and their limits (`peer`, `http_listener`,
`http_limits`), tokens and sessions (`tokens`, `sessions`), the web page
(`dashboard`, `static/`) and Prometheus' metrics (`prometheus_metrics`).

It turns requests into calls on the daemon's views, intake and control (podium.server)
and answers; nothing below it knows HTTP.
"""

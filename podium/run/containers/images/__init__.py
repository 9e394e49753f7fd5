"""Container images the enroot way: `podium image import` (enroot import) and the
per-user image cache that `--container-image=docker://...` pulls into.

- `reference`: the sources an image is imported from (docker://, dockerd://,
  podman://, docker-archive:, oci:), parsed from hostile text;
- `registry`: the Docker Registry HTTP API v2 with its token flow;
- `archives`: OCI image layouts and `docker save` archives on disk;
- `rootfs`: layers applied in order into a root tree (whiteouts, nothing written
  outside it), and the image's config turned into enroot's /etc/environment,
  /etc/rc and /etc/fstab;
- `cache`: a user's images and downloaded blobs, with a size limit;
- `importer`: the whole import, ending in a squashfs file made with mksquashfs and
  enroot's defaults.

Everything here runs as the importing user (the CLI, or the job's user for a pull
at job start): it never needs root. Standard library only.
"""

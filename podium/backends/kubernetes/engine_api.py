"""The Kubernetes calls the backend makes, through lightkube, with plain dicts in and
out and every refusal of the API server as one-line ApiError.

Kinds are named by their short names (KINDS); Kueue's and JobSet's are generic
resources at the versions the test cluster serves (Kueue v1beta2, JobSet v1alpha2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from podium.backends.kubernetes.apply import client
from podium.errors import ApiError

Obj = dict[str, Any]


def _kinds() -> dict[str, Any]:
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource
    from lightkube.resources.batch_v1 import Job
    from lightkube.resources.core_v1 import ConfigMap, Event, Node, Pod

    kueue = "kueue.x-k8s.io"
    return {
        "ConfigMap": ConfigMap,
        "Event": Event,
        "Job": Job,
        "Node": Node,
        "Pod": Pod,
        "JobSet": create_namespaced_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
        "Workload": create_namespaced_resource(kueue, "v1beta2", "Workload", "workloads"),
        "LocalQueue": create_namespaced_resource(kueue, "v1beta2", "LocalQueue", "localqueues"),
        "ClusterQueue": create_global_resource(kueue, "v1beta2", "ClusterQueue", "clusterqueues"),
    }


def _dict(obj: Any) -> Obj:
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


class KubeApi:
    """One namespace of one cluster, as the kubeconfig's user sees it."""

    def __init__(self, kubeconfig: str | None, namespace: str) -> None:
        self.kubeconfig, self.namespace = kubeconfig, namespace
        self._client: Any = None
        self._kinds: dict[str, Any] = {}

    @property
    def kube(self) -> Any:
        if self._client is None:
            self._client = client(self.kubeconfig)
            self._kinds = _kinds()
        return self._client

    def _kind(self, kind: str) -> Any:
        self.kube  # noqa: B018 (loads the kinds with the client)
        return self._kinds[kind]

    def _namespace(self, kind: str) -> str | None:
        return None if kind in ("Node", "ClusterQueue") else self.namespace

    def _call(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        from httpx import HTTPError
        from lightkube.core.exceptions import ApiError as KubeApiError

        try:
            return call(*args, **kwargs)
        except KubeApiError as exc:
            message = (exc.status.message or str(exc)).splitlines()[0]
            raise ApiError(f"{what}: {message}", exc.status.code or 502) from None
        except HTTPError as exc:
            raise ApiError(f"{what}: cannot reach the Kubernetes API server: {exc}", 502) from None

    def get(self, kind: str, name: str) -> Obj | None:
        """The object, or None when there is none of that name."""
        found = self._by_name(kind, name, self.kube.get)
        return None if found is None else _dict(found)

    def objects(self, kind: str, labels: Mapping[str, Any] | None = None) -> list[Obj]:
        return self._list(f"listing {kind}s", kind, namespace=self._namespace(kind), labels=labels)

    def pods_on(self, node: str) -> list[Obj]:
        """Every pod bound to `node`, in every namespace."""
        where = {"spec.nodeName": node}
        return self._list(f"listing the pods on {node}", "Pod", namespace="*", fields=where)

    def _list(self, what: str, kind: str, **selected: Any) -> list[Obj]:
        """The objects of `kind` the client's list selects (`selected`: namespace,
        labels, fields), as plain dicts."""
        found = self._call(what, lambda: list(self.kube.list(self._kind(kind), **selected)))
        return [_dict(o) for o in found]

    def evict(self, pod: str, namespace: str) -> None:
        """Evict `pod` through the Eviction API (the pod gets DisruptionTarget; a
        PodDisruptionBudget may refuse it: 429, raised as ApiError)."""
        from lightkube.models.meta_v1 import ObjectMeta

        eviction = self._kind("Pod").Eviction(metadata=ObjectMeta(name=pod, namespace=namespace))
        try:
            self._call(
                f"evicting Pod/{pod}", self.kube.create, eviction, name=pod, namespace=namespace
            )
        except ApiError as exc:
            if exc.status != 404:  # gone already
                raise

    def create(self, doc: Obj, dry_run: bool = False) -> Obj:
        from lightkube import codecs

        what = f"{doc['kind']}/{doc['metadata']['name']}"
        return _dict(self._call(what, self.kube.create, codecs.from_dict(doc), dry_run=dry_run))

    def replace(self, kind: str, doc: Obj) -> Obj:
        """Replace the object as read (its resourceVersion makes a concurrent change a
        409 ApiError)."""
        from lightkube import codecs

        self._kind(kind)  # Kueue's and JobSet's kinds are known to codecs once made
        what = f"{kind}/{doc['metadata']['name']}"
        return _dict(self._call(what, self.kube.replace, codecs.from_dict(doc)))

    def merge_patch(self, kind: str, name: str, patch: Obj) -> Obj:
        from lightkube.types import PatchType

        return _dict(
            self._call(
                f"{kind}/{name}",
                self.kube.patch,
                self._kind(kind),
                name,
                patch,
                namespace=self._namespace(kind),
                patch_type=PatchType.MERGE,
            )
        )

    def delete(self, kind: str, name: str) -> None:
        self._by_name(kind, name, self.kube.delete)  # already gone is gone

    def _by_name(self, kind: str, name: str, verb: Callable[..., Any]) -> Any:
        """`verb` (the client's get or delete) on object `name` of `kind`; None when
        there is no such object (404)."""
        try:
            return self._call(
                f"{kind}/{name}", verb, self._kind(kind), name, namespace=self._namespace(kind)
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def log(self, pod: str, follow: bool = False) -> Iterator[str]:
        """A pod's log lines (as the API server's kubelet proxy gives them)."""
        lines = self._call(
            f"Pod/{pod} log", self.kube.log, pod, namespace=self.namespace, follow=follow
        )
        try:
            yield from lines
        except Exception as exc:  # the stream is read lazily: its errors arrive here
            from lightkube.core.exceptions import ApiError as KubeApiError

            if isinstance(exc, KubeApiError):
                message = (exc.status.message or str(exc)).splitlines()[0]
                raise ApiError(f"Pod/{pod} log: {message}", exc.status.code or 502) from None
            raise

"""Apply manifests to a Kubernetes cluster by server-side apply, with lightkube.

Kinds the client does not know (Kueue's, JobSet's) are learnt from the cluster's CRDs
first, so a kind the cluster does not serve is a one-line error naming it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from podium.errors import ApiError, ConfigError

FIELD_MANAGER = "podium"


def client(kubeconfig: str | None) -> Any:
    """A lightkube client for `kubeconfig` (None: $KUBECONFIG, ~/.kube/config, or the
    in-cluster service account). Raises ConfigError when none can be read."""
    from lightkube import Client
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        return Client(config=config, field_manager=FIELD_MANAGER)
    except (KubeConfigError, OSError) as exc:
        where = kubeconfig or "$KUBECONFIG, ~/.kube/config or the in-cluster account"
        raise ConfigError(f"cannot use the Kubernetes config {where}: {exc}") from None


def apply_all(kube: Any, docs: Iterable[dict[str, Any]]) -> list[str]:
    """Server-side apply each document in order (forcing Podium's field ownership);
    "Kind/name" of each. Raises ApiError with the server's message on a refusal."""
    from lightkube import codecs
    from lightkube.core.exceptions import ApiError as KubeApiError
    from lightkube.core.exceptions import LoadResourceError
    from lightkube.generic_resource import load_in_cluster_generic_resources

    load_in_cluster_generic_resources(kube)
    done = []
    for doc in docs:
        what = f"{doc['kind']}/{doc['metadata']['name']}"
        try:
            obj = codecs.from_dict(doc)
        except LoadResourceError:
            raise ApiError(
                f"{what}: the cluster does not serve {doc['apiVersion']} {doc['kind']} "
                "(install Kueue's CRDs first)",
                400,
            ) from None
        try:
            kube.apply(obj, force=True)
        except KubeApiError as exc:
            raise ApiError(f"{what}: {exc.status.message}", exc.status.code or 400) from None
        done.append(what)
    return done

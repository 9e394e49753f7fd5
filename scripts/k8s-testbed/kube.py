"""The Kubernetes test cluster's own client for up.sh (standard library and PyYAML):
apply manifests by server-side apply, wait for CRDs and for readiness, make kwok nodes,
rewrite webhook configurations to reach a controller on loopback.

    python3 kube.py KUBECONFIG apply FILE...          # every document of every file
    python3 kube.py KUBECONFIG wait-crds FILE...      # until those CRDs are established
    python3 kube.py KUBECONFIG wait-ready             # until /readyz says ok
    python3 kube.py KUBECONFIG wait-active PATH...    # until Kueue objects are Active
    python3 kube.py - webhooks IN OUT URL CA          # service refs -> URL, caBundle CA
    python3 kube.py - wait-http URL...                # until each answers 200
    python3 kube.py KUBECONFIG nodes N GPUS [MIG]     # N kwok nodes with GPUS nvidia.com/gpu
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml


class Api:
    """A kube-apiserver reached with the admin kubeconfig's client certificate."""

    def __init__(self, kubeconfig: str) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self.kinds: dict[tuple[str, str], tuple[str, bool]] = {}

    def call(
        self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json"
    ) -> tuple[int, Any]:
        req = urllib.request.Request(self.server + path, data=body, method=method)
        req.add_header("Content-Type", ctype)
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as resp:
                return resp.status, _decoded(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _decoded(err.read())

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of a kind, from discovery (cached; refreshed on a miss)."""
        key = (api_version, kind)
        if key not in self.kinds:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            status, data = self.call("GET", base)
            if status != 200:
                raise LookupError(f"{api_version} is not served ({status})")
            for r in data["resources"]:
                if "/" not in r["name"]:
                    self.kinds[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        if key not in self.kinds:
            raise LookupError(f"{api_version} has no kind {kind}")
        return self.kinds[key]

    def path(self, doc: dict[str, Any]) -> str:
        api_version, kind = doc["apiVersion"], doc["kind"]
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        meta = doc["metadata"]
        ns = f"/namespaces/{meta.get('namespace', 'default')}" if namespaced else ""
        return f"{base}{ns}/{plural}/{meta['name']}"

    def apply(self, doc: dict[str, Any]) -> None:
        """Server-side apply, retried while the kind is not served yet (a new CRD)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                path = self.path(doc)
                break
            except LookupError:
                if time.monotonic() > deadline:
                    raise
                self.kinds.clear()
                time.sleep(0.5)
        body = json.dumps(doc).encode()
        status, data = self.call(
            "PATCH",
            f"{path}?fieldManager=podium-testbed&force=true",
            body,
            "application/apply-patch+yaml",
        )
        if status not in (200, 201):
            raise RuntimeError(f"apply {doc['kind']}/{doc['metadata']['name']}: {status} {data}")


def _decoded(text: bytes) -> Any:
    """JSON where the body is JSON (/readyz answers plain text)."""
    try:
        return json.loads(text or b"null")
    except ValueError:
        return text.decode(errors="replace")


def documents(files: list[str]) -> list[dict[str, Any]]:
    return [d for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d]


def wait_condition(api: Api, paths: list[str], condition: str) -> None:
    """Until the object at each API path has `condition` True (60 s in all)."""
    deadline = time.monotonic() + 60
    for path in paths:
        while True:
            status, obj = api.call("GET", path)
            conds = obj.get("status", {}).get("conditions", []) if status == 200 else []
            if any(c["type"] == condition and c["status"] == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} never {condition}: {obj}")
            time.sleep(0.2)


def wait_crds(api: Api, files: list[str]) -> None:
    """Until every CRD in these files is Established."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
    crds = [d for d in documents(files) if d["kind"] == "CustomResourceDefinition"]
    wait_condition(api, [base + d["metadata"]["name"] for d in crds], "Established")


def wait_ready(api: Api) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            status, _ = api.call("GET", "/readyz")
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("kube-apiserver never ready")


def webhooks(src: str, dst: str, url: str, ca_file: str) -> None:
    """Webhook configurations whose service references become `url` + the path, trusted
    by the CA in `ca_file`; names made unique per controller by `url`'s port."""
    ca = base64.b64encode(Path(ca_file).read_bytes()).decode()
    out = []
    port = url.rsplit(":", 1)[-1]
    for doc in documents([src]):
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{port}"
        for hook in doc.get("webhooks", []):
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": url + service.get("path", "/"), "caBundle": ca}
        out.append(doc)
    Path(dst).write_text(yaml.safe_dump_all(out))


def nodes(api: Api, count: int, gpus: int, mig: dict[str, int]) -> None:
    """`count` kwok nodes (kwok-node-1...) of `gpus` GPUs, 64 CPUs and 512 GiB."""
    for i in range(1, count + 1):
        name = f"kwok-node-{i}"
        capacity = {
            "cpu": "64",
            "memory": "512Gi",
            "pods": "110",
            "nvidia.com/gpu": str(gpus),
            **{k: str(v) for k, v in mig.items()},
        }
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                    },
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    },
                },
                "spec": {},
                "status": {"capacity": capacity, "allocatable": capacity},
            }
        )


def wait_http(urls: list[str], timeout: float = 60) -> None:
    """Until each plain-HTTP URL (a controller's health probe) answers 200."""
    deadline = time.monotonic() + timeout
    for url in urls:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} never answered 200")
            time.sleep(0.2)


def main(argv: list[str]) -> int:
    kubeconfig, command, *rest = argv
    if command == "webhooks":
        webhooks(*rest)
        return 0
    if command == "wait-http":
        wait_http(rest)
        return 0
    api = Api(kubeconfig)
    if command == "apply":
        for doc in documents(rest):
            api.apply(doc)
    elif command == "wait-crds":
        wait_crds(api, rest)
    elif command == "wait-ready":
        wait_ready(api)
    elif command == "wait-active":
        wait_condition(api, rest, "Active")
    elif command == "nodes":
        mig = json.loads(rest[2]) if len(rest) > 2 else {}
        nodes(api, int(rest[0]), int(rest[1]), mig)
    else:
        print(f"kube.py: unknown command {command}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Importing container images (podium.run.containers.images): sources parsed from hostile text,
layers applied as Docker applies them and never outside the root, OCI layouts,
docker-archives and a registry behind the token flow turned into squashfs files,
and the per-user cache with its size limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from podium.run.containers.images import reference, rootfs
from podium.run.containers.images.archives import file_layer
from podium.run.containers.images.cache import Cache, parse_size
from podium.run.containers.images.importer import ensure, import_image
from podium.run.containers.images.reference import ImageError
from tests import imagekit
from tests.imagekit import Entry

NEEDS_TOOLS = pytest.mark.skipif(
    shutil.which("mksquashfs") is None or shutil.which("unsquashfs") is None
    or imagekit.BUSYBOX is None,
    reason="needs Debian's squashfs-tools and busybox-static (.ci/run installs them)",
)  # fmt: skip


def test_sources_in_enroots_and_skopeos_forms() -> None:
    src = reference.parse("docker://$oauthtoken@nvcr.io#nvidia/pytorch:24.07-py3")
    assert (src.kind, src.user, src.registry, src.repository, src.reference) == (
        "docker", "$oauthtoken", "nvcr.io", "nvidia/pytorch", "24.07-py3")  # fmt: skip
    assert src.name == "nvidia+pytorch+24.07-py3"
    hub = reference.parse("ubuntu")  # Pyxis' form: Docker Hub, library/, latest
    assert (hub.registry, hub.repository, hub.reference, hub.name) == (
        "registry-1.docker.io", "library/ubuntu", "latest", "ubuntu+latest")  # fmt: skip
    local = reference.parse("docker://127.0.0.1:5000#lab/env@sha256:" + "a" * 64)
    assert local.registry == "127.0.0.1:5000" and local.reference == "sha256:" + "a" * 64
    assert reference.parse("dockerd://alpine:3.19").kind == "dockerd"
    assert reference.parse("podman://alpine").reference == "latest"
    archive = reference.parse("docker-archive:/data/img.tar:lab/env:1")
    assert (archive.path, archive.reference, archive.name) == (
        "/data/img.tar", "lab/env:1", "lab+env+1")  # fmt: skip
    layout = reference.parse("oci:./my layout:v2")
    assert (layout.path, layout.name) == ("./my layout", "my_layout+v2")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("docker://UPPER/case", "lower-case IMAGE"),
        ("docker://a#b#c", "not an image reference"),
        ("http://example.com/x", "unknown scheme"),
        ("docker://busybox:tag;rm -rf /", "not an image reference"),
        ("oci:relative/dir", "absolute or ./ path"),
        ("dockerd://Bad", "lower-case name"),
        ("", "not an image source"),
    ],
)
def test_a_bad_source_is_one_line_naming_the_forms(text: str, words: str) -> None:
    with pytest.raises(ImageError) as err:
        reference.parse(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def _apply(root: Path, *layers: bytes) -> rootfs.Modes:
    modes = rootfs.Modes()
    for data in layers:
        path = root.parent / f"layer-{len(list(root.parent.iterdir()))}"
        path.write_bytes(data)
        rootfs.apply(str(root), file_layer("", "", None, str(path)), modes)
    modes.finish()
    return modes


def test_layers_apply_in_order_with_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    base = imagekit.layer([
        Entry("etc", "dir", mode=0o755), Entry("etc/gone", data=b"x"), Entry("etc/kept", data=b"k"),
        Entry("opt", "dir", mode=0o755), Entry("opt/old", data=b"o"), Entry("opt/sub", "dir"),
        Entry("opt/sub/deep", data=b"d"), Entry("secret", data=b"s", mode=0o000),
        Entry("ro", "dir", mode=0o555), Entry("ro/f", data=b"f"),
    ])  # fmt: skip
    top = imagekit.layer([
        Entry("etc/.wh.gone"), Entry("opt/sub", "dir"), Entry("opt/.wh..wh..opq"),
        Entry("opt/sub/new", data=b"n"), Entry("opt/fresh", data=b"f"),
        Entry("etc/kept", data=b"replaced"), Entry("link", "hardlink", target="etc/kept"),
    ])  # fmt: skip
    modes = _apply(root, base, top)
    assert not (root / "etc/gone").exists() and (root / "etc/kept").read_bytes() == b"replaced"
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["fresh", "sub"]
    assert [p.name for p in (root / "opt/sub").iterdir()] == ["new"]  # lower content hidden
    assert os.stat(root / "link").st_ino == os.stat(root / "etc/kept").st_ino
    # kept readable for mksquashfs; the image gets the real mode back
    pseudo = modes.pseudo(str(root)).splitlines()
    assert "secret m 0 0 0" in pseudo and "ro m 555 0 0" in pseudo
    assert os.access(root / "secret", os.R_OK)


def test_a_hostile_layer_writes_nothing_outside_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    hostile = imagekit.layer([
        Entry("../escaped", data=b"x"), Entry("/abs", data=b"a"),
        Entry("up", "symlink", target="../../outside"), Entry("up/through", data=b"t"),
        Entry("abs-link", "symlink", target=str(outside)), Entry("abs-link/into", data=b"i"),
        Entry("hard", "hardlink", target="../outside/x"), Entry("dev", "dir"),
        Entry("dev/null", "char"), Entry("pipe", "fifo"),
    ])  # fmt: skip
    _apply(root, hostile)
    assert list(outside.iterdir()) == [] and not (tmp_path / "escaped").exists()
    assert (root / "abs").read_bytes() == b"a"
    # links stay links; what was written through them landed inside the root
    assert (root / "outside" / "through").read_bytes() == b"t"
    assert (root / str(outside).lstrip("/") / "into").read_bytes() == b"i"
    assert not (root / "hard").exists() and not (root / "dev/null").exists()
    assert (root / "pipe").is_fifo()


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    return Cache(str(tmp_path / "cache"))


def _listing(sqsh: str) -> dict[str, str]:
    """Each path in the image and its mode string, as `unsquashfs -lls` lists them."""
    out = subprocess.run(["unsquashfs", "-lls", "-d", "R", sqsh], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    entries = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("R"):
            entries[fields[5].removeprefix("R") or "/"] = fields[0]
    return entries


def _cat(sqsh: str, path: str, tmp: Path) -> str:
    dest = tmp / f"cat-{path.strip('/').replace('/', '-')}"
    subprocess.run(["unsquashfs", "-no-xattrs", "-q", "-d", str(dest), sqsh, path], check=True,
                   capture_output=True)  # fmt: skip
    return (dest / path.lstrip("/")).read_text()


@NEEDS_TOOLS
def test_an_oci_layout_becomes_a_squashfs_in_enroots_format(tmp_path: Path, cache: Cache) -> None:
    cfg = imagekit.config(Env=["PATH=/bin", "LAB=vision"], Entrypoint=["/bin/echo", "hi"],
                          Cmd=["there"], WorkingDir="/data", Volumes={"/scratch": {}})  # fmt: skip
    top = imagekit.layer([Entry("marker", data=b"second\n"), Entry("secret", data=b"s", mode=0)])
    image = imagekit.build([imagekit.busybox_layer(), top], cfg)
    layout = imagekit.oci_layout(tmp_path / "layout", image, "v1")
    out = import_image(f"oci:{layout}:v1", str(tmp_path / "out.sqsh"), cache=cache)
    listing = _listing(out)
    assert listing["/bin/busybox"].startswith("-rwx") and listing["/secret"] == "----------"
    assert _cat(out, "/marker", tmp_path) == "second\n"
    assert _cat(out, "/etc/environment", tmp_path) == "PATH=/bin\nLAB=vision\n"
    assert _cat(out, "/etc/fstab", tmp_path).startswith("tmpfs /scratch tmpfs x-create=dir")
    rc = _cat(out, "/etc/rc", tmp_path)
    assert "cd /data" in rc and 'exec /bin/echo hi "$@"' in rc and "exec /bin/echo hi there" in rc
    with pytest.raises(ImageError, match="already exists"):
        import_image(f"oci:{layout}:v1", out, cache=cache)
    with pytest.raises(ImageError, match="no image named 'v2'"):
        import_image(f"oci:{layout}:v2", str(tmp_path / "x.sqsh"), cache=cache)


@NEEDS_TOOLS
def test_a_docker_archive_and_another_architecture(tmp_path: Path, cache: Cache) -> None:
    layers = [imagekit.busybox_layer("from-an-archive")]
    archive = imagekit.docker_archive(tmp_path / "img.tar", layers, imagekit.config(), "lab/env:1")
    out = import_image(f"docker-archive:{archive}:lab/env:1", cache=cache)
    assert out == cache.image("lab+env+1") and _cat(out, "/marker", tmp_path) == "from-an-archive\n"
    arm = imagekit.docker_archive(tmp_path / "arm.tar", layers, imagekit.config("arm64"), "x:1")
    with pytest.raises(ImageError, match=r"for linux/arm64, not linux/amd64; pass --arch"):
        import_image(f"docker-archive:{arm}", cache=cache)
    assert import_image(f"docker-archive:{arm}", str(tmp_path / "a.sqsh"), "arm64", cache)


@pytest.fixture
def registry() -> Iterator[imagekit.RegistryServer]:
    server = imagekit.RegistryServer(login=("ada", "s3cret"))
    try:
        yield server
    finally:
        server.close()


@NEEDS_TOOLS
def test_a_registry_behind_the_token_flow(
    tmp_path: Path, cache: Cache, registry: imagekit.RegistryServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    amd = imagekit.build([imagekit.busybox_layer("amd64-image")], imagekit.config())
    arm = imagekit.build([imagekit.busybox_layer("arm64-image")], imagekit.config("arm64"))
    registry.add("lab/env", "amd", amd)
    registry.add("lab/env", "arm", arm)
    registry.indexes[("lab/env", "1")] = imagekit.index({"arm64": arm, "amd64": amd})
    ref = f"docker://ada@{registry.address}#lab/env:1"
    with pytest.raises(ImageError, match="no password for ada"):
        import_image(ref, cache=cache)
    creds = tmp_path / "credentials"
    creds.write_text(f"machine {registry.address} login ada password wrong\n")
    monkeypatch.setenv("PODIUM_CREDENTIALS", str(creds))
    with pytest.raises(ImageError, match=r"token service .* refused"):
        import_image(ref, cache=cache)
    creds.write_text(f"machine {registry.address} login ada password s3cret\n")
    out = import_image(ref, cache=cache)  # the index's linux/amd64 manifest
    assert _cat(out, "/marker", tmp_path) == "amd64-image\n"
    cdn = [had for _, path, had in registry.seen if path.startswith("/cdn/")]
    assert cdn and not any(cdn)  # blobs redirected elsewhere got no token
    fetched = len(registry.seen)
    ensure(ref, cache=cache)  # cached: nothing asked of the registry
    assert len(registry.seen) == fetched
    missing = f"docker://ada@{registry.address}#lab/env:nope"
    with pytest.raises(ImageError, match="MANIFEST_UNKNOWN manifest unknown"):
        import_image(missing, cache=cache)
    registry.corrupt.add(next(iter(amd.blobs)))
    for blob in Path(cache.blobs).iterdir():
        blob.unlink()
    with pytest.raises(ImageError, match="does not match its digest"):
        import_image(ref, str(tmp_path / "bad.sqsh"), cache=cache)
    assert not (tmp_path / "bad.sqsh").exists() and not list(Path(cache.work).glob("import-*"))


def test_the_cache_keeps_to_its_size_by_last_use(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path / "c"), limit=parse_size("3K"))
    cache.ensure()
    for i, name in enumerate(("old", "mid", "new")):
        Path(cache.image(name)).write_bytes(b"x" * 1024)
        cache.record(name, f"docker://lab/{name}", "")
        os.utime(cache.image(name), (1000 + i, 1000 + i))
    Path(cache.blob("sha256:" + "b" * 64)).write_bytes(b"y" * 1024)
    os.utime(cache.blob("sha256:" + "b" * 64), (5000, 5000))
    removed = cache.evict(keep=cache.image("old"))
    assert removed == [cache.blob("sha256:" + "b" * 64)]  # blobs go first
    Path(cache.image("extra")).write_bytes(b"z" * 1024)
    assert cache.evict(keep=cache.image("extra")) == [cache.image("old")]  # then the oldest
    assert [e.name for e in cache.entries()] == ["extra", "new", "mid"]
    assert json.loads(Path(cache.root, "new.json").read_text())["source"] == "docker://lab/new"
    assert cache.remove("mid") and not cache.remove("mid")
    with pytest.raises(ImageError, match="is not an image name"):
        cache.image("../escape")
    assert parse_size("20G") == 20 << 30 and parse_size("512M") == 512 << 20

"""`podium image`: import container images as enroot does, and keep a per-user cache
of them (list, remove). Runs as you, with no daemon."""

from __future__ import annotations

import datetime as dt

import click

from podium.cli import render
from podium.cli.progress_bar import while_working
from podium.errors import SpecError
from podium.run.containers.images.cache import Cache
from podium.run.containers.images.importer import import_image
from podium.run.containers.images.reference import ImageError


@click.group()
def image() -> None:
    """Container images: import (enroot import), list, rm."""


@image.command("import")
@click.argument("uri")
@click.option("--output", "-o", default=None, help="Write the image here, not into the cache.")
@click.option("--arch", "-a", default=None, help="The image's architecture (default: this host's).")
def import_(uri: str, output: str | None, arch: str | None) -> None:
    """Import URI as a squashfs image: docker://[USER@][REGISTRY#]IMAGE[:TAG],
    dockerd://IMAGE[:TAG], podman://IMAGE[:TAG], docker-archive:PATH[:IMAGE[:TAG]] or
    oci:PATH[:REF]. Without --output it goes to your image cache, where
    --container-image=REFERENCE finds it; prints where it went."""
    try:
        click.echo(
            while_working("podium image import", f"importing {uri}",
                          lambda: import_image(uri, output, arch))
        )  # fmt: skip
    except ImageError as exc:
        raise SpecError(str(exc)) from None


@image.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_(as_json: bool) -> None:
    """The images in your cache, most recently used first."""
    entries = Cache().entries()
    if as_json:
        keys = ("name", "path", "size", "source", "created", "used")
        render.print_json([{k: getattr(e, k) for k in keys} for e in entries])
        return
    rows = [
        [e.name, e.source, f"{e.size / 2**20:.1f}M", _when(e.created), _when(e.used)]
        for e in entries
    ]
    render.table(None, ["NAME", "SOURCE", "SIZE", "CREATED", "USED"], rows)


@image.command("rm")
@click.argument("names", nargs=-1, required=True)
def rm(names: tuple[str, ...]) -> None:
    """Remove images from your cache by name (as `podium image list` shows them)."""
    cache = Cache()
    missing = []
    for name in names:
        try:
            if not cache.remove(name):
                missing.append(name)
        except ImageError as exc:
            raise SpecError(str(exc)) from None
    if missing:
        raise SpecError(f"no image {missing[0]!r} in your cache (podium image list shows them)")


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


__all__ = ["image"]

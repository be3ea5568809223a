"""`bert-cache`: the releases that named sources (`hf://ORG/NAME`) were fetched into, listed or removed.

Example:
>>> import tempfile
>>> release_cache("list", cache_dir=tempfile.mkdtemp())
no cached releases in ...
"""

from keras_bert_impl.checkpoints.sources import default_releases_dir, list_cached_releases, remove_cached_release

COMMANDS = ("list", "rm")


def release_cache(command, sources=(), cache_dir=None, out=print):
    """Runs `bert-cache COMMAND`.

    Args:
        command: `"list"`: one line per cached release (source at its
            commit, the revisions that named it, size, directory);
            `"rm"`: removes the cached copies of each of `sources`
            (`hf://ORG/NAME`: every commit; `hf://ORG/NAME@REVISION`: that one).
        sources: For `"rm"`.
        cache_dir: Root of the cache (default `sources.default_releases_dir()`).
        out: Where the lines go.

    Raises:
        ValueError: an unknown command, or `"rm"` without sources.
        SourceError: a source that is not a named one.
    """
    root = cache_dir or default_releases_dir()
    if command == "list":
        releases = list_cached_releases(root)
        if not releases:
            out(f"no cached releases in {root}")
        for release in releases:
            revisions = ",".join(release.revisions) or "-"
            out(f"{release.source}\t{revisions}\t{release.size / 1e6:.1f} MB\t{release.directory}")
    elif command == "rm":
        if not sources:
            raise ValueError("rm: name the sources to remove (hf://ORG/NAME[@REVISION])")
        for source in sources:
            removed = remove_cached_release(source, root)
            out(f"{source}: " + (f"removed {', '.join(removed)}" if removed else "not in the cache"))
    else:
        raise ValueError(f"unknown command {command!r}: one of {', '.join(COMMANDS)}")

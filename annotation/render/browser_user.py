"""Start Chromium as an unprivileged user: run as a script, before the browser (docs/rendering.md "Isolation").

``python -I -S browser_user.py UID GID CHROMIUM ARG...``: what Playwright starts, through the shim
:func:`annotation.render.chromium.browser_command` writes, when the renderer runs as root. It hands
the browser profile Playwright just made (``--user-data-dir``, a fresh root-owned temporary
folder) to the user, makes it the browser's ``HOME``, drops the supplementary groups, the group
and the user, and replaces itself with Chromium: the same process, so Playwright's pipe (file
descriptors 3 and 4) and its process id carry over. Chromium, no longer root, then starts its own
sandbox (user namespaces and seccomp-bpf for every renderer).

Standard library only, and no import of the project: it runs with ``-I -S`` (no environment,
no site packages) before anything else.
"""

import os
import sys

PROFILE_SWITCH = "--user-data-dir="


def hand_over(folder: str, uid: int, gid: int) -> None:
    """Give ``folder`` and everything in it to ``uid``:``gid`` (links are changed, never followed)."""
    for root, dirs, files in os.walk(folder):
        os.lchown(root, uid, gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def main(argv: list[str]) -> None:
    uid, gid, chromium, args = int(argv[1]), int(argv[2]), argv[3], argv[4:]
    if uid == 0:
        raise SystemExit("browser_user: refusing to start the browser as root")
    profiles = [a[len(PROFILE_SWITCH):] for a in args if a.startswith(PROFILE_SWITCH)]
    for profile in profiles:
        hand_over(profile, uid, gid)
    env = dict(os.environ)
    if profiles:
        env["HOME"] = profiles[-1]
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise SystemExit("browser_user: the user could not be changed")
    os.execve(chromium, [chromium, *args], env)


if __name__ == "__main__":
    main(sys.argv)

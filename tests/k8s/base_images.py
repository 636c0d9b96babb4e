"""What the Dockerfile's base images hold in /etc/passwd and /etc/group, as the images' own
documentation and build recipes give them (not read from the Dockerfile): the data the image checks
run the Dockerfile's user setup against (tests/k8s/test_k8s_image.py).

- ubuntu:24.04, and every nvidia/cuda:*-ubuntu24.04 image built FROM it: Ubuntu's base system users
  plus, since Ubuntu 23.04's container images, the default user `ubuntu` as uid 1000 and group
  `ubuntu` as gid 1000 (the Ubuntu 23.04 release notes, "the ubuntu user is now included in the
  container images"; NVIDIA's CUDA images add no user of their own).
- python:3.11-slim (Debian): Debian's base system users only; nothing at 1000.

Each entry is matched against a FROM line by a regular expression; a base that matches none is a
test failure that asks for its data.
"""

from __future__ import annotations

import re

_DEBIAN_SYSTEM_PASSWD = """\
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sync:x:4:65534:sync:/bin:/bin/sync
games:x:5:60:games:/usr/games:/usr/sbin/nologin
man:x:6:12:man:/var/cache/man:/usr/sbin/nologin
lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin
mail:x:8:8:mail:/var/mail:/usr/sbin/nologin
news:x:9:9:news:/var/spool/news:/usr/sbin/nologin
uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin
proxy:x:13:13:proxy:/bin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
backup:x:34:34:backup:/var/backups:/usr/sbin/nologin
list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin
irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin
_apt:x:42:65534::/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
"""

_DEBIAN_SYSTEM_GROUP = """\
root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
news:x:9:
uucp:x:10:
man:x:12:
proxy:x:13:
kmem:x:15:
dialout:x:20:
fax:x:21:
voice:x:22:
cdrom:x:24:
floppy:x:25:
tape:x:26:
sudo:x:27:
audio:x:29:
dip:x:30:
www-data:x:33:
backup:x:34:
operator:x:37:
list:x:38:
irc:x:39:
src:x:40:
shadow:x:42:
utmp:x:43:
video:x:44:
sasl:x:45:
plugdev:x:46:
staff:x:50:
games:x:60:
users:x:100:
nogroup:x:65534:
"""

# /etc/login.defs of Debian and Ubuntu, the settings useradd reads: a new user gets a group of its
# own name (USERGROUPS_ENAB), ids from 1000.
_DEBIAN_LOGIN_DEFS = """\
UID_MIN 1000
UID_MAX 60000
GID_MIN 1000
GID_MAX 60000
USERGROUPS_ENAB yes
"""

BASE_IMAGES = [
    {
        "from": r"(nvidia/cuda:[\d.]+-(base|runtime|devel)-ubuntu24\.04|ubuntu:24\.04)",
        "passwd": _DEBIAN_SYSTEM_PASSWD + "ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\n",
        "group": _DEBIAN_SYSTEM_GROUP + "ubuntu:x:1000:\n",
        "homes": ["/home/ubuntu"],
        "python": "3.12",  # Ubuntu 24.04's python3
        "login_defs": _DEBIAN_LOGIN_DEFS,
    },
    {
        "from": r"python:3\.\d+-slim(-\w+)?",
        "passwd": _DEBIAN_SYSTEM_PASSWD,
        "group": _DEBIAN_SYSTEM_GROUP,
        "homes": [],
        "python": "3.11",
        "login_defs": _DEBIAN_LOGIN_DEFS,
    },
]


def base_image(from_line: str) -> dict | None:
    """The data of the image a `FROM image [AS name]` line names, or None."""
    image = from_line.split()[1]
    return next((b for b in BASE_IMAGES if re.fullmatch(b["from"], image)), None)

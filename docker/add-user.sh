#!/bin/sh
# Makes uid 1000 and gid 1000 the image's user and group `toolsweep` (home /home/toolsweep), whatever
# the base image already has there: nvidia/cuda:*-ubuntu24.04, like ubuntu:24.04, ships user and
# group `ubuntu` as 1000 (a plain `useradd --uid 1000` stops the build with "UID 1000 is not
# unique"); Debian's python images have neither. The pods run as 1000 (runAsUser), so the ids must be
# exactly these; the name matters to what looks the user up (getpass, ~).
#
#   add-user.sh [ROOT]    ROOT: the filesystem to change; / in an image build, a copy in the tests
#                         (tests/k8s/test_k8s_image.py runs it on each base image's users)
set -eu
root="${1:-/}"
user=$(awk -F: '$3 == 1000 { print $1 }' "$root/etc/passwd")
if [ -n "$user" ]; then
    home=$(awk -F: -v u="$user" '$1 == u { print $6 }' "$root/etc/passwd")
    userdel --prefix "$root" "$user"
    case "$home" in /home/?*) rm -rf "${root%/}$home" ;; esac
fi
group=$(awk -F: '$3 == 1000 { print $1 }' "$root/etc/group")
if [ -n "$group" ]; then
    groupdel --prefix "$root" "$group"
fi
groupadd --prefix "$root" --gid 1000 toolsweep
useradd --prefix "$root" --uid 1000 --gid 1000 --create-home --home-dir /home/toolsweep --shell /bin/bash toolsweep

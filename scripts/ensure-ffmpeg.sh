#!/usr/bin/env bash
# ffmpeg, which `npm run evaluate -- liveness-footage` uses to cut real videos into frames, installed
# from Debian when missing. Only the evaluation needs it; the tests do not. Installing needs root and
# apt-get; elsewhere it says what to run.
set -euo pipefail

if command -v ffmpeg >/dev/null 2>&1; then
  echo "ensure-ffmpeg: ffmpeg ok ($(command -v ffmpeg))"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-ffmpeg: ERROR: ffmpeg is missing: run  sudo apt-get update && sudo apt-get install -y ffmpeg" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy ffmpeg 2>/dev/null | grep -q 'Candidate: [^(]'; then apt-get update -qq; fi
apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
command -v ffmpeg >/dev/null 2>&1 || { echo "ensure-ffmpeg: ERROR: the ffmpeg package installed no ffmpeg" >&2; exit 1; }
echo "ensure-ffmpeg: installed ffmpeg"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package colod's build, tests, benchmarks, demo and vmtests need.
# Idempotent: packages already present are left alone. Nothing is downloaded outside apt.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: must run as root (apt-get install)" >&2
  exit 1
fi

packages=(
  # Build toolchain and BPF.
  build-essential cmake pkg-config clang llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev
  zlib1g-dev
  # Libraries.
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc libfmt-dev libspdlog-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  # Tests and benchmarks.
  libgtest-dev libgmock-dev libbenchmark-dev stress-ng redis-server redis-tools procps util-linux
  # The colocation benchmark and demo harness (peer control socket, result parsing).
  python3
  # The Go runtime-side NRI test peer (GOPATH mode, Debian's Go sources only).
  golang-go golang-github-containerd-ttrpc-dev golang-github-gogo-protobuf-dev
  golang-google-protobuf-dev golang-github-sirupsen-logrus-dev
  # The deploy tests (systemd-analyze verify of the unit).
  systemd
  # vmtests and the demo plot.
  qemu-system-x86 linux-image-amd64 busybox-static cpio gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
# redis-server's package starts a system instance; the tests run their own on private ports.
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now redis-server >/dev/null 2>&1 || true
fi

#!/usr/bin/env bash
# Builds phasor-go-example offline from Debian's Go packages (GOPATH mode):
#   bash client/go/build.sh OUT_DIR      (from the repository root)
# CMake's phasor_go_example target runs it; docs/LANGUAGES.md quotes it.
# Needs golang-go, protoc-gen-go, protoc-gen-go-grpc, golang-google-grpc-dev,
# golang-google-protobuf-dev, golang-github-golang-protobuf-1-5-dev and
# golang-google-genproto-dev (deploy/install-deps.sh --test).
set -euo pipefail
out=$(realpath "${1:?usage: build.sh OUT_DIR}")
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

# Stubs: go_package "phasor.dev/api/phasor/v1" puts them under that import
# path, inside a GOPATH of our own.
mkdir -p "$out/gopath/src"
protoc -I proto --go_out="$out/gopath/src" --go-grpc_out="$out/gopath/src" \
  proto/phasor/v1/encoder.proto

# GOPATH mode reads Debian's sources in /usr/share/gocode as they are (no
# go.sum, no module proxy); GOPROXY=off makes sure nothing is fetched.
GO111MODULE=off GOPROXY=off GOFLAGS= \
  GOPATH="$out/gopath:/usr/share/gocode" GOCACHE="$out/go-cache" \
  go build -o "$out/phasor-go-example" client/go/main.go

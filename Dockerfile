# Both binaries, idem-check and idem-reference-server, in a small image:
#   docker build -t idem-check .
#   docker run --rm idem-check run https://api.example.com/v1/payments …
# .ci/dockerfile-steps runs this build stage's RUN lines without a container engine (CI has
# none), so they cannot rot unnoticed.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
# CI sets --debug to skip the release build; images are built without it.
ARG INSTALL_FLAGS=""
ARG OUT=/out
RUN cargo install --locked $INSTALL_FLAGS --path . --root "$OUT" --target-dir target
RUN cargo install --locked $INSTALL_FLAGS --path reference-server --root "$OUT" --target-dir target

FROM debian:bookworm-slim
COPY --from=build /out/bin/ /usr/local/bin/
RUN idem-check --version && idem-reference-server --version
ENTRYPOINT ["idem-check"]

# multienv/node-base: the local Debian base (multienv/base:bookworm, from debootstrap) plus the
# node binary of the machine that builds it (Node 20, the version the tests run; Debian's own
# nodejs is 18). Its context is a directory holding just that binary (scripts/build-images.sh).
ARG BASE_IMAGE=multienv/base:bookworm
FROM ${BASE_IMAGE}
COPY node /usr/local/bin/node
RUN node --version

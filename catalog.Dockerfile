# The operator's file-based catalog, served by opm for a CatalogSource:
#   make catalog-build CATALOG_IMG=...   (catalog/ is made by `make catalog`)
# The opm tag is operator-registry's version in hack/tools/olm/go.mod, the opm
# the OLM tests build this image with (test/olmenv; a test holds them together).
FROM quay.io/operator-framework/opm:v1.73.0

ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]

ADD catalog /configs
# Build the serving cache into the image, so that the catalog starts fast
# and a malformed catalog fails the build instead of the CatalogSource.
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]

LABEL operators.operatorframework.io.index.configs.v1=/configs

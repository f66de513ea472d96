#!/bin/sh
# The stand-in's entry point, as the official image's: S3Proxy configured by the
# S3PROXY_* and JCLOUDS_* variables (the ones the official image documents for a local
# back end), passed as system properties.
mkdir -p "${JCLOUDS_FILESYSTEM_BASEDIR}"
exec java $S3PROXY_JAVA_OPTS \
    -DLOG_LEVEL="${LOG_LEVEL}" \
    -Ds3proxy.endpoint="${S3PROXY_ENDPOINT}" \
    -Ds3proxy.authorization="${S3PROXY_AUTHORIZATION}" \
    -Ds3proxy.identity="${S3PROXY_IDENTITY}" \
    -Ds3proxy.credential="${S3PROXY_CREDENTIAL}" \
    -Djclouds.provider="${JCLOUDS_PROVIDER}" \
    -Djclouds.identity="${JCLOUDS_IDENTITY}" \
    -Djclouds.credential="${JCLOUDS_CREDENTIAL}" \
    -Djclouds.regions="${JCLOUDS_REGIONS}" \
    -Djclouds.filesystem.basedir="${JCLOUDS_FILESYSTEM_BASEDIR}" \
    -jar /opt/s3proxy/s3proxy \
    --properties /dev/null

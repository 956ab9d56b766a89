#!/bin/sh
echo "bazel coverage is unavailable offline (t4a uses a stub remote_coverage_tools)" >&2
exit 1

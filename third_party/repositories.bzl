"""System packages as Bazel repositories: Debian's cmocka, xxHash, jemalloc and the CUDA toolkit
headers. Only build glue lives here; no upstream code is copied.

The CUDA path is configurable: --repo_env=T4A_CUDA_PATH=/opt/cuda (default /usr/local/cuda)."""

def _cuda_headers_impl(ctx):
    path = ctx.os.environ.get("T4A_CUDA_PATH", "/usr/local/cuda")
    include = ctx.path(path + "/include")
    if not include.get_child("cuda.h").exists:
        fail("cuda.h not found under %s/include: install the CUDA toolkit headers or set " % path +
             "--repo_env=T4A_CUDA_PATH to the toolkit's root")
    ctx.symlink(include, "include")
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# Headers only: t4a loads libcuda and libnvrtc at run time and never links them (nor the stub).
cc_library(
    name = "headers",
    hdrs = glob(["include/*.h", "include/crt/*.h", "include/nv/**", "include/cuda/std/**"]),
    includes = ["include"],
)
""")

cuda_headers_repository = repository_rule(
    implementation = _cuda_headers_impl,
    environ = ["T4A_CUDA_PATH"],
    local = True,
)

def t4a_system_repositories():
    """Declares @cmocka, @xxhash, @jemalloc and @cuda. The build files are str(Label())s, so a workspace
    that takes t4a as a dependency (examples/bazel_consumer) can call this from @t4a too."""
    native.new_local_repository(
        name = "cmocka",
        path = "/usr",
        build_file = str(Label("//third_party:cmocka.BUILD")),
    )
    native.new_local_repository(
        name = "xxhash",
        path = "/usr",
        build_file = str(Label("//third_party:xxhash.BUILD")),
    )
    native.new_local_repository(
        name = "jemalloc",
        path = "/usr",
        build_file = str(Label("//third_party:jemalloc.BUILD")),
    )
    cuda_headers_repository(name = "cuda")

"""The compiler options of every t4a target (Bazel, and CMake through scripts/gen_cmake.py)."""

T4A_COPTS = [
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-Wshadow",
    "-Wvla",
]

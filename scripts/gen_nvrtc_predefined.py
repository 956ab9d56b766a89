#!/usr/bin/env python3
"""The macros NVRTC predefines that can paste a caller's tokens together.

NVRTC defines some macros in every program with no include (its built-in headers, the bytes of
libnvrtc-builtins): among them the nv/target machinery, whose _NV_CONCAT_EVAL1 and _NV_PASTE5
paste two of their parameters (l##r). A use of such a macro that no text of the request defines
could paste __has_include together out of the caller's tokens where the include check sees no
`##` (docs/design.md §11, "Macros NVRTC predefines"). This script reads every #define of the
built-in libraries, finds those with a `##` between two parameters, and closes the set over the
predefined macros whose bodies name one; it writes the sorted names, as an X-macro list, into
t4a_nvrtc/nvrtc_predefined.h. It also writes every #define of the libraries (each distinct one,
normalized) as a second list, which the include check reads as if a text defined them (a
built-in that hands back a name, an alias, or a paster whose name is pasted, passes a caller's
tokens to a paste the check must see), and, as a third list, the built-ins whose paste with a
fixed operand could make __has_include, __has_include_next or __has_embed out of a parameter of
several tokens (`__ ## a ## __` with `has_include(...) y`): a text that names one counts as
pasting. And it asks the installed NVRTC (loaded with ctypes) which reserved names the compiler
itself predefines (no #define shows them: __cplusplus, __cpp_rtti, __EDG_PTRDIFF_TYPE__), of the
reserved names the built-in libraries, libnvrtc, the toolkit's headers and a list of EDG's and
C++'s spell, under several targets and options, and their values: a fourth list, and their
definitions join the second. A fifth lists the identifiers of the definitions' bodies (the
wrappers' and the pieces' rules read them), a sixth the fixed operands of their chains of pastes
(the third is derived from it; the wrappers' rule reads it).

  scripts/gen_nvrtc_predefined.py            regenerate from the toolkit's libnvrtc-builtins
  scripts/gen_nvrtc_predefined.py --check    fail if the file differs from what the installed
                                             libraries give (the drift lane)

The libraries are looked for in $T4A_CUDA_PATH/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64
(libnvrtc-builtins.so.* and libnvrtc-builtins.alt.so.*, the highest version's both).
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "t4a_nvrtc", "nvrtc_predefined.h")
DEFINE = re.compile(rb"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r"##|[A-Za-z_][A-Za-z0-9_]*|\.\.\.|\S")


def libraries():
    for base in (os.environ.get("T4A_CUDA_PATH"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if not base:
            continue
        found = sorted(glob.glob(os.path.join(base, "lib64", "libnvrtc-builtins*.so.*")))
        if found:
            return found
    return []


def definitions(paths):
    """name -> [text after the name of each #define], logical lines (splices joined)."""
    defs = {}
    for path in paths:
        data = open(path, "rb").read()
        for m in DEFINE.finditer(data):
            j, out = m.end(), bytearray()
            while j < len(data) and data[j] != 0:
                if data[j] == 0x5C and data[j + 1 : j + 2] == b"\n":
                    j += 2
                    continue
                if data[j] == 0x0A:
                    break
                out.append(data[j])
                j += 1
            defs.setdefault(m.group(1).decode(), []).append(out.decode("latin-1"))
    return defs


def pastes_parameters(text):
    """Whether a function-like definition has a ## with a parameter on both sides."""
    m = re.match(r"\(([^)]*)\)", text)
    if not m:
        return False
    params = {p.strip().rstrip(".").strip() or "__VA_ARGS__" for p in m.group(1).split(",")}
    params.add("__VA_ARGS__")
    toks = TOKEN.findall(text[m.end():])
    return any(t == "##" and 0 < i < len(toks) - 1 and toks[i - 1] in params and toks[i + 1] in params
               for i, t in enumerate(toks))


def closure(defs):
    names = {n for n, texts in defs.items() if any(pastes_parameters(t) for t in texts)}
    grew = True
    while grew:
        grew = False
        for n, texts in defs.items():
            if n not in names and any(i in names for t in texts for i in IDENT.findall(t)):
                names.add(n)
                grew = True
    return sorted(names)


NORM_TOKEN = re.compile(r"""/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|##|\.\.\.|"""
                        r"""[A-Za-z0-9_]+|\S""", re.S)


def normalized(text):
    """A definition's text after its name as tokens joined by one space, comments dropped (the
    same as nvrtc_cacheable.c's def_normalize): identifier and number runs, ## and ..., string and
    character literals whole, any other byte alone."""
    toks = [t for t in NORM_TOKEN.findall(text) if not t.startswith("/*") and not t.startswith("//")]
    return " ".join(toks)


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def every_definition(defs, compiler):
    """[(name, parameters, body)]: each distinct #define of the libraries and each value the
    compiler gives a predefined name, normalized, sorted; parameters "( a , b )" or ""."""
    every = []
    for n in sorted(defs):
        for t in sorted(set(defs[n])):
            params, body = "", t
            if t.startswith("("):
                close = t.index(")")
                params, body = normalized(t[:close + 1]), t[close + 1:]
            every.append((n, params, normalized(body)))
    every += [(n, "", normalized(v)) for n, vs in compiler for v in vs]
    return sorted(set(every))


def fixed_tokens(params, body):
    """The tokens of a normalized body, each with whether it is fixed: an identifier or number
    that is not a parameter."""
    ps = set(re.findall(r"[A-Za-z_$][A-Za-z0-9_$]*", params)) | {"__VA_ARGS__"}
    return [(t, re.match(r"[A-Za-z0-9_$]+$", t) is not None and t not in ps)
            for t in NORM_TOKEN.findall(body)]


def paste_operands(every):
    """[(operand, position, chain, macro)]: each fixed operand of a chain of pastes in the
    definitions, in their order. A parameter may take several tokens and a paste joins only the
    tokens beside it, so a fixed first operand ('f') can start a name, a fixed last one ('l') end
    it, one between ('m') stand in it; chain: the chain's text, for messages."""
    out, seen = [], set()
    for n, params, body in every:
        toks = fixed_tokens(params, body)
        i = 0
        while i < len(toks):
            e = i
            while e + 2 < len(toks) and toks[e + 1][0] == "##":
                e += 2
            ops = toks[i:e + 1:2]
            chain = " ## ".join(t for t, _ in ops)
            for k, (t, fixed) in enumerate(ops):
                if e == i or not fixed:
                    continue
                pos = "f" if k == 0 else "l" if k == len(ops) - 1 else "m"
                if (t, pos, chain, n) not in seen:
                    seen.add((t, pos, chain, n))
                    out.append((t, pos, chain, n))
            i = e + 1
    return out


def operand_makes(operand, pos, name):
    """Whether a paste whose fixed operand stands at pos could make name."""
    if pos == "f":
        return name.startswith(operand)
    return name.endswith(operand) if pos == "l" else operand in name


def render(names, paths, defs, every, operands, compiler, rtc_defined):
    lines = ["/* Generated by scripts/gen_nvrtc_predefined.py (do not edit; the drift lane checks it",
             " * against the installed libraries) from " +
             ", ".join(os.path.basename(p) for p in paths) + ":",
             " * the macros NVRTC predefines that can paste a caller's tokens together (design",
             " * section 11, \"Macros NVRTC predefines\"). X(name, definitions) for each, sorted;",
             " * definitions: each distinct #define of the name in the libraries, normalized (tokens",
             " * joined by one space, comments dropped), one per line. */",
             "#ifndef T4A_NVRTC_NVRTC_PREDEFINED_H_",
             "#define T4A_NVRTC_NVRTC_PREDEFINED_H_",
             "",
             "#define T4A_NVRTC_PREDEFINED_PASTERS(X) \\"]
    def entry(n, last):
        """X(n, "...") over lines of at most 100 columns: each definition its own string
        pieces (split at spaces), the pieces concatenated by the compiler."""
        variants = sorted({normalized(t) for t in defs[n]})
        pieces = []
        for vi, v in enumerate(variants):
            words, cur = v.split(" "), ""
            for w in words:
                if cur and len(cur) + 1 + len(w) > 80:
                    pieces.append(cur + " ")
                    cur = w
                else:
                    cur = cur + " " + w if cur else w
            pieces.append(cur + ("\n" if vi + 1 < len(variants) else ""))
        out = ["  X(%s, \\" % n]
        for pi, p in enumerate(pieces):
            tail = ")" if pi + 1 == len(pieces) else ""
            if pi + 1 < len(pieces) or not last:
                tail += " \\"
            out.append("    %s%s" % (c_string(p), tail))
        return out
    for i, n in enumerate(names):
        lines += entry(n, i + 1 == len(names))
    lines += ["",
              "/* Every #define of the libraries: X(\"name\", \"parameters\", \"body\") for each distinct",
              " * one, normalized as above, sorted by name; parameters \"( a , b )\" for a function-like",
              " * macro, \"\" for an object-like one. */",
              "#define T4A_NVRTC_BUILTIN_DEFINES(X) \\"]
    body_names = {}  # every identifier of a body that is not a parameter -> the first macro's name
    for n, params, body in every:
        for tok, fixed in fixed_tokens(params, body):
            if fixed and not tok[0].isdigit():
                body_names.setdefault(tok, n)
    target_pasters = sorted({n for t, pos, _, n in operands
                             if any(operand_makes(t, pos, tgt) for tgt in TARGETS)})
    def chunks(text):
        """text as string pieces of at most about 80 bytes, split after spaces."""
        out, cur = [], ""
        for w in text.split(" "):
            if cur and len(cur) + 1 + len(w) > 80:
                out.append(cur + " ")
                cur = w
            else:
                cur = cur + " " + w if cur else w
        return out + [cur]
    for i, (n, params, body) in enumerate(every):
        tail = ")" + ("" if i + 1 == len(every) else " \\")
        one = "  X(%s, %s, %s)" % (c_string(n), c_string(params), c_string(body))
        if len(one) + len(tail) - 1 <= 100:
            lines.append(one[:-1] + tail)
            continue
        args = [c_string(n) + ","] + [c_string(c) for c in chunks(params)]
        args[-1] += ","
        args += [c_string(c) for c in chunks(body)]
        lines.append("  X(%s \\" % args[0])
        for k, a in enumerate(args[1:]):
            lines.append("    %s%s" % (a, tail if k + 2 == len(args) else " \\"))
    lines += ["",
              "/* The fixed operands of those definitions' chains of pastes: X(\"operand\", position,",
              " * \"chain in macro\"); position 'f' (first: it can start the pasted name), 'l' (last:",
              " * end it) or 'm' (between: stand in it), a parameter taking several tokens. */",
              "#define T4A_NVRTC_BUILTIN_PASTE_OPERANDS(X) \\"]
    for i, (t, pos, chain, n) in enumerate(operands):
        lines.append("  X(%s, '%s', %s)%s" % (c_string(t), pos, c_string("%s in %s" % (chain, n)),
                                             "" if i + 1 == len(operands) else " \\"))
    lines += ["",
              "/* The built-ins whose paste with a fixed operand could make __has_include,",
              " * __has_include_next or __has_embed out of a parameter of several tokens: a text",
              " * that names one counts as pasting. X(\"name\") for each, sorted. */",
              "#define T4A_NVRTC_BUILTIN_TARGET_PASTERS(X) \\"]
    for i, n in enumerate(target_pasters):
        lines.append("  X(%s)%s" % (c_string(n), "" if i + 1 == len(target_pasters) else " \\"))
    if not target_pasters:
        lines[-1] = lines[-1][:-2]
    lines += ["",
              "/* Every identifier of those definitions' bodies that is not a parameter, and the first",
              " * macro whose body holds it: X(\"identifier\", \"macro\"), sorted. */",
              "#define T4A_NVRTC_BUILTIN_BODY_NAMES(X) \\"]
    for i, (tok, n) in enumerate(sorted(body_names.items())):
        lines.append("  X(%s, %s)%s" % (c_string(tok), c_string(n),
                                         "" if i + 1 == len(body_names) else " \\"))
    lines += ["",
              "/* The reserved names the compiler itself predefines (no #define of the libraries",
              " * shows them; probed with NVRTC under several targets and options), sorted; their",
              " * values are in T4A_NVRTC_BUILTIN_DEFINES too. X(\"name\") for each. */",
              "#define T4A_NVRTC_COMPILER_PREDEFINED(X) \\"]
    for i, (n, _) in enumerate(compiler):
        lines.append("  X(%s)%s" % (c_string(n), "" if i + 1 == len(compiler) else " \\"))
    if not compiler:
        raise SystemExit("gen_nvrtc_predefined: NVRTC predefines no reserved name? (the probe)")
    lines += ["",
              "/* 1: NVRTC defines __CUDACC_RTC__ under every probed target and option, and no text of",
              " * the libraries #undefs it or saves and restores it (push_macro / pop_macro), so that",
              " * the include check may skip the groups NVRTC skips by it (design section 11). */",
              "#define T4A_NVRTC_RTC_ALWAYS_DEFINED %d" % (1 if rtc_defined else 0)]
    lines += ["", "#endif /* T4A_NVRTC_NVRTC_PREDEFINED_H_ */"]
    return "\n".join(lines) + "\n"


TARGETS = ("__has_include", "__has_include_next", "__has_embed")


# Names the compiler may predefine that no header spells: EDG's type and ABI macros and C++'s
# feature-test macros (the probe keeps those NVRTC defines).
EXTRA_CANDIDATES = """__EDG_SIZE_TYPE__ __EDG_PTRDIFF_TYPE__ __EDG_WCHAR_T_TYPE__ __EDG_IA64_ABI
__EDG_IA64_ABI_VARIANT_CTORS_AND_DTORS_RETURN_THIS __EDG_IA64_ABI_USE_INT_STATIC_INIT_GUARD
__EDG_TYPE_TRAITS_ENABLED __EDG_BSD __EDG_SYSV __EDG_ANSIC __EDG_RUNTIME_USES_NAMESPACES
__EDG_IMPLICIT_USING_STD __EDG_CPP11_IL_EXTENSIONS_SUPPORTED __EDG_VERSION__ __EDG__
__SIGNED_CHARS__ _WCHAR_T _BOOL __WCHAR_T_IS_KEYWORD __ARRAY_OPERATORS __PLACEMENT_DELETE
__VARIADIC_TEMPLATES __RTTI __EXCEPTIONS __NO_EXCEPTIONS __STDC__ __STDC_VERSION__
__STDC_HOSTED__ __STDCPP_THREADS__ __STDCPP_DEFAULT_NEW_ALIGNMENT__ __STDC_ISO_10646__
__DATE__ __TIME__ __COUNTER__ __BASE_FILE__ __TIMESTAMP__ __INCLUDE_LEVEL__
__cpp_aggregate_bases __cpp_aggregate_nsdmi __cpp_aggregate_paren_init __cpp_alias_templates
__cpp_aligned_new __cpp_attributes __cpp_binary_literals __cpp_capture_star_this __cpp_char8_t
__cpp_concepts __cpp_conditional_explicit __cpp_consteval __cpp_constexpr
__cpp_constexpr_dynamic_alloc __cpp_constexpr_in_decltype __cpp_constinit __cpp_decltype
__cpp_decltype_auto __cpp_deduction_guides __cpp_delegating_constructors __cpp_designated_initializers
__cpp_enumerator_attributes __cpp_exceptions __cpp_explicit_this_parameter __cpp_fold_expressions
__cpp_generic_lambdas __cpp_guaranteed_copy_elision __cpp_hex_float __cpp_if_consteval
__cpp_if_constexpr __cpp_impl_coroutine __cpp_impl_destroying_delete __cpp_impl_three_way_comparison
__cpp_inheriting_constructors __cpp_init_captures __cpp_initializer_lists __cpp_inline_variables
__cpp_lambdas __cpp_modules __cpp_multidimensional_subscript __cpp_namespace_attributes
__cpp_noexcept_function_type __cpp_nontype_template_args __cpp_nontype_template_parameter_auto
__cpp_nsdmi __cpp_range_based_for __cpp_raw_strings __cpp_ref_qualifiers __cpp_return_type_deduction
__cpp_rtti __cpp_rvalue_references __cpp_size_t_suffix __cpp_sized_deallocation
__cpp_static_assert __cpp_static_call_operator __cpp_structured_bindings __cpp_template_template_args
__cpp_threadsafe_static_init __cpp_unicode_characters __cpp_unicode_literals
__cpp_user_defined_literals __cpp_using_enum __cpp_variable_templates __cpp_variadic_templates
__cpp_variadic_using __cplusplus __CHAR_BIT__ __SIZEOF_INT__ __SIZEOF_LONG__ __SIZEOF_POINTER__
__SIZE_TYPE__ __PTRDIFF_TYPE__ __WCHAR_TYPE__ __CHAR16_TYPE__ __CHAR32_TYPE__ __INT_MAX__
__LONG_MAX__ __LP64__ _LP64 __x86_64 __x86_64__ __linux __linux__ __unix __unix__ __gnu_linux__
__ELF__ __GNUC__ __GNUC_MINOR__ __GNUG__ __clang__ _MSC_VER _WIN32 _WIN64 __CUDACC__ __NVCC__
__CUDACC_RTC__ __CUDA_ARCH__ __CUDA_ARCH_LIST__ __CUDACC_VER_MAJOR__ __CUDACC_VER_MINOR__
__CUDACC_VER_BUILD__ __CUDACC_DEBUG__ __CUDACC_RDC__ __CUDACC_EWP__ __CUDACC_RELAXED_CONSTEXPR__
__CUDACC_EXTENDED_LAMBDA__ __CUDA_NO_HALF_OPERATORS__ __OPTIMIZE__""".split()

# Stringizing these shows no value (operators, or a value per line or call).
NO_VALUE = {"__FILE__", "__LINE__", "__COUNTER__", "__DATE__", "__TIME__", "__TIMESTAMP__",
            "__BASE_FILE__", "__INCLUDE_LEVEL__"}


# The targets and the options the cache accepts that change what the compiler predefines
# (measured: -std, -G, -rdc, -ewp, -device-int128, -minimal, the fast-math family, an `a` or `f`
# target); the probe takes the union of the names each defines.
PROBE_CONFIGS = [
    ("sm_90", []), ("sm_90a", []), ("sm_100f", []), ("compute_90", []),
    ("sm_90", ["-std=c++11"]), ("sm_90", ["-std=c++14"]), ("sm_90", ["-std=c++20"]),
    ("sm_90", ["-G"]), ("sm_90", ["-rdc=true"]), ("sm_90", ["-ewp"]),
    ("sm_90", ["-device-int128"]), ("sm_100", ["-device-float128"]), ("sm_90", ["-minimal"]),
    ("sm_90", ["-use_fast_math"]), ("sm_90", ["-ftz=true", "-prec-div=false", "-prec-sqrt=false",
                                              "-fmad=false"]),
    ("sm_90", ["-default-device"]), ("sm_90", ["-restrict"]), ("sm_90", ["-lineinfo"]),
]


def nvrtc_log(lib, src, target="sm_90", options=()):
    """NVRTC's log of compiling src (the probe fails on purpose: the log is kept)."""
    import ctypes
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"probe.cu", 0, None, None) != 0:
        raise SystemExit("gen_nvrtc_predefined: nvrtcCreateProgram failed")
    args = [("--gpu-architecture=" + target).encode()] + [o.encode() for o in options]
    opts = (ctypes.c_char_p * len(args))(*args)
    lib.nvrtcCompileProgram(prog, len(args), opts)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return buf.value.decode("latin-1")


def compiler_predefines(paths, defs):
    """[(name, [values])]: the reserved names NVRTC defines with no #define of the built-in
    libraries, under any of PROBE_CONFIGS, of the candidates: the reserved names the built-in
    libraries, libnvrtc itself (the -D options it passes to its front end), the toolkit's headers
    and EXTRA_CANDIDATES spell. Values by stringizing, under each configuration (none where
    stringizing shows none, as for __LINE__ or an operator such as __has_include)."""
    import ctypes
    libdir = os.path.dirname(paths[0])
    found = sorted(glob.glob(os.path.join(libdir, "libnvrtc.so.*")))
    if not found:
        raise SystemExit("gen_nvrtc_predefined: no libnvrtc.so.* beside %s" % paths[0])
    lib = ctypes.CDLL(found[0])
    reserved = re.compile(rb"\b_[A-Z_][A-Za-z0-9_]*")
    names = set(EXTRA_CANDIDATES)
    for p in paths + found[:1]:
        names |= {x.decode() for x in reserved.findall(open(p, "rb").read())}
    include = os.path.join(os.path.dirname(libdir), "include")
    for root, _, files in os.walk(include):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                names |= {x.decode() for x in reserved.findall(fh.read())}
    src = "".join("#ifdef %s\n#warning T4A_DEFINED:%s\n#endif\n" % (n, n) for n in sorted(names))
    defined = set()
    for target, options in PROBE_CONFIGS:
        log = nvrtc_log(lib, src + "#error end\n", target, options)
        if "#error directive: end" not in log:
            raise SystemExit("gen_nvrtc_predefined: the probe of predefined names did not run "
                             "for %s %s" % (target, " ".join(options)))
        defined |= set(re.findall(r"#warning directive: T4A_DEFINED:(\w+)", log))
    defined = sorted(defined - set(defs))
    values = {}
    asked = [n for n in defined if n not in NO_VALUE and not n.startswith("__has_") and
             n != "__is_identifier"]
    for target, options in PROBE_CONFIGS:
        for i in range(0, len(asked), 50):
            src = ("#define T4A_S(...) #__VA_ARGS__\n#define T4A_X(...) T4A_S(__VA_ARGS__)\n" +
                   "".join("#ifdef %s\nstatic_assert(0, \"T4A_VAL:%s=\" T4A_X(%s) \":T4A_END\");\n"
                           "#endif\n" % (n, n, n) for n in asked[i:i + 50]))
            log = nvrtc_log(lib, src, target, options)
            for m in re.finditer(r'failed with "T4A_VAL:(\w+)=(.*?):T4A_END"', log):
                if m.group(2) != m.group(1):
                    values.setdefault(m.group(1), set()).add(m.group(2))
    return [(n, sorted(values.get(n, ()))) for n in defined]


def rtc_always_defined(paths):
    """Whether every PROBE_CONFIGS compile sees __CUDACC_RTC__ defined and no built-in library
    text #undefs it or names it in a push_macro / pop_macro."""
    import ctypes
    for p in paths:
        data = open(p, "rb").read()
        if re.search(rb"#[ \t]*undef[ \t]+__CUDACC_RTC__|_macro[ \t]*\([ \t]*\"__CUDACC_RTC__", data):
            return False
    found = sorted(glob.glob(os.path.join(os.path.dirname(paths[0]), "libnvrtc.so.*")))
    lib = ctypes.CDLL(found[0])
    src = "#ifndef __CUDACC_RTC__\n#error T4A_RTC_UNDEFINED\n#endif\n#error end\n"
    for target, options in PROBE_CONFIGS:
        log = nvrtc_log(lib, src, target, options)
        if "#error directive: end" not in log:
            raise SystemExit("gen_nvrtc_predefined: the __CUDACC_RTC__ probe did not run for %s %s" %
                             (target, " ".join(options)))
        if "T4A_RTC_UNDEFINED" in log:
            return False
    return True


def main():
    paths = libraries()
    if not paths:
        print("gen_nvrtc_predefined: no libnvrtc-builtins found (set T4A_CUDA_PATH)", file=sys.stderr)
        return 1
    defs = definitions(paths)
    compiler = compiler_predefines(paths, defs)
    every = every_definition(defs, compiler)
    want = render(closure(defs), paths, defs, every, paste_operands(every), compiler,
                  rtc_always_defined(paths))
    if "--check" in sys.argv[1:]:
        have = open(OUT).read() if os.path.exists(OUT) else ""
        if have != want:
            print("nvrtc predefined check: t4a_nvrtc/nvrtc_predefined.h differs from what the "
                  "installed NVRTC predefines; run scripts/gen_nvrtc_predefined.py", file=sys.stderr)
            return 1
        print("nvrtc predefined check: ok (%d macros that paste, from %s)" %
              (want.split("T4A_NVRTC_BUILTIN_DEFINES")[0].count("  X("), ", ".join(os.path.basename(p) for p in paths)))
        return 0
    with open(OUT, "w") as f:
        f.write(want)
    print("wrote %s (%d macros that paste, %d definitions)" %
          (os.path.relpath(OUT, ROOT), want.split("T4A_NVRTC_BUILTIN_DEFINES")[0].count("  X("),
           want.split("T4A_NVRTC_BUILTIN_DEFINES")[1].split("T4A_NVRTC_BUILTIN_PASTE_OPERANDS")[0].count("  X(")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

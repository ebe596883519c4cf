#!/usr/bin/python3
"""Generate bindings/rust/tfcore-sys/src/bindings.rs from the public headers.

Like the Python cdef, the input is the preprocessed header (cc -E, with
__attribute__ stripped), not the header text with its macros; only lines
that come from include/tfcore/*.h are kept. Every declaration is then
translated to Rust:

  typedef enum e {A = 0, ...} e;     pub type e = i32; pub const A: e = 0;
  typedef struct s s;                #[repr(C)] pub struct s { _private: [u8; 0], ... }
  typedef struct s {fields} s;       #[repr(C)] pub struct s { fields }
  typedef R (*f)(args);              pub type f = Option<unsafe extern "C" fn(args) -> R>;
  R name(args);                      extern "C" { pub fn name(args) -> R; }

Integer object-like macros named TFC_* or DLPACK_* (TFC_MAX_DIMS,
TFC_GRAD_ACCUMULATE, ...) are read from the header text and become consts, since they are part
of the API a caller needs.

  gen_sys.py                 write src/bindings.rs
  gen_sys.py --check         exit 1 (with a diff) when src/bindings.rs is stale
  options: --cc CC (default $CC or cc), --include DIR (default <repo>/include)
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(HERE, "tfcore-sys", "src", "bindings.rs")

PRIMITIVES = {
    "void": "c_void", "char": "c_char", "signed char": "c_schar", "unsigned char": "c_uchar",
    "short": "c_short", "short int": "c_short", "unsigned short": "c_ushort", "unsigned short int": "c_ushort",
    "int": "c_int", "signed": "c_int", "signed int": "c_int", "unsigned": "c_uint", "unsigned int": "c_uint",
    "long": "c_long", "long int": "c_long", "unsigned long": "c_ulong", "unsigned long int": "c_ulong",
    "long long": "c_longlong", "long long int": "c_longlong",
    "unsigned long long": "c_ulonglong", "unsigned long long int": "c_ulonglong",
    "float": "f32", "double": "f64", "_Bool": "bool", "bool": "bool",
    "size_t": "usize", "ptrdiff_t": "isize", "ssize_t": "isize", "intptr_t": "isize", "uintptr_t": "usize",
    "int8_t": "i8", "int16_t": "i16", "int32_t": "i32", "int64_t": "i64",
    "uint8_t": "u8", "uint16_t": "u16", "uint32_t": "u32", "uint64_t": "u64",
}
QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "extern", "static", "inline"}
TYPE_WORDS = {"signed", "unsigned", "short", "long", "int", "char", "void", "float", "double", "_Bool"}
RUST_KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl",
    "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
    "yield", "try", "gen",
}


class GenError(Exception):
    pass


KNOWN_TYPES = set()  # typedef and struct names declared so far


def ident(name):
    if name in ("self", "Self", "super", "crate"):  # keywords that cannot be raw identifiers
        return name + "_"
    return "r#" + name if name in RUST_KEYWORDS else name


def preprocess(cc, include):
    header = os.path.join(include, "tfcore", "tfcore.h")
    cmd = cc.split() + ["-E", "-std=c11", "-D__attribute__(x)=", "-I", include, header]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    keep, ours = [], False
    marker = re.compile(r'^# \d+ "([^"]+)"')
    for line in text.splitlines():
        m = marker.match(line)
        if m:
            ours = os.path.basename(os.path.dirname(m.group(1))) == "tfcore" and m.group(1).endswith(".h")
            continue
        if ours and not line.startswith("#"):
            keep.append(line)
    return "\n".join(keep)


def macros(include):
    """Integer object-like TFC_* / DLPACK_* macros, in header order: (name, rust type, value)."""
    out = []
    order = header_order(include)
    pat = re.compile(r"^\s*#\s*define\s+((?:TFC|DLPACK)_[A-Z0-9_]+)\s+\(?(-?(?:0[xX][0-9a-fA-F]+|\d+))([uU]?)[lL]*\)?\s*(?:/\*.*\*/)?\s*$")
    for name in order:
        with open(os.path.join(include, "tfcore", name)) as f:
            for line in f:
                m = pat.match(line)
                if m:
                    out.append((m.group(1), "u32" if m.group(3) else "i32", m.group(2)))
    return out


def header_order(include):
    """tfcore.h's includes, in order (the order of the preprocessed text)."""
    names = []
    with open(os.path.join(include, "tfcore", "tfcore.h")) as f:
        for line in f:
            m = re.match(r'\s*#\s*include\s+"tfcore/([a-z0-9_]+\.h)"', line)
            if m:
                names.append(m.group(1))
    return names


def tokenize(text):
    return re.findall(r"[A-Za-z_]\w*|0[xX][0-9a-fA-F]+|\d+|\.\.\.|[{}()\[\];,*=\-+~|&<>]", text)


def split_decls(tokens):
    """Top-level declarations (token lists), split at ';' outside braces."""
    decls, cur, depth = [], [], 0
    for t in tokens:
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
        if t == ";" and depth == 0:
            if cur:
                decls.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        raise GenError("trailing tokens without ';': " + " ".join(cur))
    return decls


def split_commas(tokens):
    parts, cur, depth = [], [], 0
    for t in tokens:
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        if t == "," and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


def base_type(tokens):
    """(rust type, is_const) of a specifier list like ['const', 'unsigned', 'int']."""
    const = "const" in tokens
    words = [t for t in tokens if t not in QUALIFIERS]
    if words[:1] in (["struct"], ["enum"], ["union"]):
        if words[0] == "union":
            raise GenError("unions are not allowed in the public API")
        words = words[1:]
    key = " ".join(words)
    if key in PRIMITIVES:
        return PRIMITIVES[key], const
    if len(words) == 1 and words[0] in KNOWN_TYPES:
        return words[0], const
    raise GenError("no Rust mapping for C type '%s'" % key)


def pointer_type(base, const, stars):
    """Apply pointer levels; stars is a list of per-level const flags of the
    pointers themselves. Rust's *const/*mut follows the pointee's constness."""
    t, pointee_const = base, const
    for star_const in stars:
        t = ("*const " if pointee_const else "*mut ") + t
        pointee_const = star_const
    return t


def fn_type(ret_tokens, params):
    ret = c_type(ret_tokens)
    args = ", ".join(param_list(params, anonymous_ok=True))
    arrow = "" if ret == "c_void" else " -> " + ret
    return 'Option<unsafe extern "C" fn(%s)%s>' % (args, arrow)


def c_type(tokens):
    """Rust type of an abstract declarator (no name), e.g. 'const char *'."""
    spec, stars = [], []
    for t in tokens:
        if t == "*":
            stars.append(False)
        elif t == "const" and stars:
            stars[-1] = True
        elif t in QUALIFIERS and stars:
            continue
        else:
            spec.append(t)
    base, const = base_type(spec)
    return pointer_type(base, const, stars)


def declarator(tokens, anonymous_ok=False):
    """(name, rust type) of one declaration like 'const int64_t *dims',
    'tfc_deleter deleter', 'int64_t dims[8]' or 'void (*cb)(void *ctx)'."""
    if "(" in tokens:  # function pointer: R (*name)(params)
        i = tokens.index("(")
        j = tokens.index(")", i)
        inner = tokens[i + 1:j]
        if "*" not in inner:
            raise GenError("unsupported declarator: " + " ".join(tokens))
        names = [t for t in inner if t not in ("*", "const")]
        name = names[0] if names else None
        params = tokens[j + 2:-1] if tokens[j + 1] == "(" and tokens[-1] == ")" else None
        if params is None:
            raise GenError("unsupported function pointer: " + " ".join(tokens))
        return name, fn_type(tokens[:i], params)
    array = None
    if "[" in tokens:
        i = tokens.index("[")
        array = tokens[i + 1:tokens.index("]", i)]
        tokens = tokens[:i]
    name = None
    last = tokens[-1]
    if re.match(r"^[A-Za-z_]\w*$", last) and last not in QUALIFIERS and last not in TYPE_WORDS:
        specs = [t for t in tokens[:-1] if t not in QUALIFIERS and t != "*"]
        if specs and not (specs in (["struct"], ["enum"])):
            name, tokens = last, tokens[:-1]
    if name is None and not anonymous_ok:
        raise GenError("declaration without a name: " + " ".join(tokens))
    t = c_type(tokens)
    if array is not None:
        return name, (t, array)
    return name, t


def param_list(params, anonymous_ok=False):
    parts = split_commas(params)
    if parts in ([], [["void"]]):
        return []
    out = []
    for k, p in enumerate(parts):
        if p == ["..."]:
            raise GenError("variadic functions are not allowed in the public API")
        name, t = declarator(p, anonymous_ok=True)
        if isinstance(t, tuple):  # array parameter decays to a pointer
            t = ("*const " if t[0].startswith("*const") else "*mut ") + t[0]
        out.append("%s: %s" % (ident(name) if name else "arg%d" % k, t))
    return out


def eval_int(tokens, known):
    expr = " ".join(known.get(t, t) for t in tokens)
    if not re.match(r"^[\d\sxXa-fA-F()+\-*<>|&~]*$", expr):
        raise GenError("enum value is not an integer expression: " + expr)
    return eval(expr)  # only digits and operators reach here


def translate(decls):
    items = []  # (kind, text)
    functions = []
    known = {}
    for d in decls:
        if d[0] == "typedef" and d[1] == "enum":
            o, c = d.index("{"), len(d) - 1 - d[::-1].index("}")
            name = d[c + 1]
            KNOWN_TYPES.add(name)
            lines = ["pub type %s = i32;" % name]
            value = -1
            for part in split_commas(d[o + 1:c]):
                if "=" in part:
                    value = eval_int(part[2:], known)
                else:
                    value += 1
                known[part[0]] = str(value)
                lines.append("pub const %s: %s = %d;" % (part[0], name, value))
            items.append("\n".join(lines))
        elif d[0] == "typedef" and d[1] == "struct" and "{" not in d:
            if len(d) != 4 or d[2] != d[3]:
                raise GenError("unsupported struct typedef: " + " ".join(d))
            KNOWN_TYPES.add(d[2])
            items.append("#[repr(C)]\npub struct %s {\n    _private: [u8; 0],\n"
                         "    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,\n}" % d[2])
        elif d[0] == "typedef" and d[1] == "struct":
            o, c = d.index("{"), len(d) - 1 - d[::-1].index("}")
            name = d[c + 1]
            if d[2] != "{" and d[2] != name:
                raise GenError("struct tag %s differs from its typedef name %s" % (d[2], name))
            KNOWN_TYPES.add(name)
            fields = []
            for f in split_decls(d[o + 1:c] + [";"]):
                fname, t = declarator(f)
                if isinstance(t, tuple):
                    n = eval_int(t[1], known)
                    t = "[%s; %d]" % (t[0], n)
                fields.append("    pub %s: %s," % (ident(fname), t))
            items.append("#[repr(C)]\n#[derive(Debug, Copy, Clone)]\npub struct %s {\n%s\n}" % (name, "\n".join(fields)))
        elif d[0] == "typedef":
            name, t = declarator(d[1:])
            KNOWN_TYPES.add(name)
            if isinstance(t, tuple):
                raise GenError("array typedefs are not supported: " + " ".join(d))
            items.append("pub type %s = %s;" % (name, t))
        else:
            i = d.index("(")
            name = d[i - 1]
            ret = c_type(d[:i - 1])
            args = ", ".join(param_list(d[i + 1:-1]))
            if d[-1] != ")":
                raise GenError("unsupported declaration: " + " ".join(d))
            arrow = "" if ret == "c_void" else " -> " + ret
            functions.append("    pub fn %s(%s)%s;" % (name, args, arrow))
    return items, functions


def generate(cc, include):
    decls = split_decls(tokenize(preprocess(cc, include)))
    items, functions = translate(decls)
    consts = ["pub const %s: %s = %s;" % m for m in macros(include)]
    out = [
        "// Generated by bindings/rust/gen_sys.py from include/tfcore/*.h. Do not edit:",
        "// run /usr/bin/python3 bindings/rust/gen_sys.py after changing a public header.",
        "",
        "#[allow(unused_imports)]",
        "use core::ffi::{c_char, c_int, c_long, c_longlong, c_schar, c_short, c_uchar, c_uint, c_ulong, c_ulonglong, c_ushort, c_void};",
        "",
        "// Integer macros of the headers.",
    ]
    out += consts
    out.append("")
    for it in items:
        out.append(it)
        out.append("")
    out.append('extern "C" {')
    out += functions
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--include", default=os.path.join(ROOT, "include"))
    ap.add_argument("--output", default=OUT)
    a = ap.parse_args()
    try:
        text = generate(a.cc, a.include)
    except (GenError, subprocess.CalledProcessError) as e:
        print("gen_sys.py: %s" % e, file=sys.stderr)
        return 2
    if a.check:
        old = open(a.output).read() if os.path.exists(a.output) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       "committed bindings.rs", "from the headers"))
            print("gen_sys.py: %s is stale: run /usr/bin/python3 bindings/rust/gen_sys.py" % a.output, file=sys.stderr)
            return 1
        print("gen_sys.py: bindings.rs matches the headers")
        return 0
    with open(a.output, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

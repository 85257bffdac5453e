#!/usr/bin/python3
"""Differential fuzzer: radixlm's Jinja engine against python3-jinja2 set up as transformers does.

What it compares. Random templates drawn from the grammar radixlm supports (src/jinja/template.h:
text and whitespace control, {{ }}, if/elif/else, for with filters, else, loop.*, break/continue,
set (names, tuples, namespace attributes, blocks), macros with defaults, generation, raw,
comments; expressions over literals, context names, attributes, subscripts, slices, globals,
every filter, test and method of src/jinja/builtins.cc, str.format, all operators), mostly
well typed so outputs are compared and some not so errors are, each with a random context
(messages with content strings or parts, tool calls with dict or string arguments, reasoning,
tools, flags, unicode / quote / backslash / newline strings, ints, floats, nested dicts); and
the real chat templates of --templates (default /work/shared/data/chat_templates) with random
conversations. radixlm renders them in batches through `radixlm template cases`; the reference
is tests/jinja_reference_test.py's reference_env() (transformers' apply_chat_template:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
raise_exception, strftime_now at 1736942400) plus transformers' {% generation %} tag
(AssistantTracker: the body is a CallBlock, rendered through caller()), with tools and
documents None when the context has none.

    /usr/bin/python3 fuzz/template_diff.py build/src/cli/radixlm --seconds 60 --seed 1
    /usr/bin/python3 fuzz/template_diff.py RADIXLM --seconds 14400 --out /tmp/fuzz-findings/template

Findings. Both render: the texts must be byte-identical. Both raise: the same exception class
(and for TemplateError, the same message: raise_exception's). Anything else is a disagreement,
unless the KNOWN table below explains it (counted by name, never a finding). A crash or a hang
of `radixlm template cases` is a finding too (the case bisected out of its batch). Each finding
is minimised (the template delta-debugged by removing blocks, tags, text and expression tokens,
then the context, while the same kind of disagreement persists), deduplicated by signature
(the kind + the tags, filters, tests and methods left in the minimised template) and written
to OUT/finding-NNN.json {"template", "context", "reference", "radixlm", "seed"}. The last line
printed is a JSON summary; the exit status is 1 when anything was found.
"""
import argparse, atexit, datetime, json, os, random, re, shutil, sys, tempfile, time, warnings
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import CaseRunner  # noqa: E402
try:
    import jinja2, jinja2.ext, jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # the test suite runs this where Debian's module may be missing
    print("SKIPPED: %s (scripts/setup.sh installs it)" % e)
    sys.exit(77)

NOW = 1736942400

# Differences radixlm documents (template.h), matched on (reference, radixlm) outcomes; each
# outcome is ("text", s) or (error class, message).
KNOWN = [
    # Both refuse the template, under different exception classes (Python's hierarchy: a
    # TypeError here, an AttributeError or UndefinedError there). The render fails either way;
    # raise_exception's TemplateError is still compared exactly (compare()).
    ("error_class", lambda ref, got, src: ref[0] != "text" and got[0] != "text" and "TemplateError" not in (ref[0], got[0])),
    # Integers are 64-bit and checked: what Python computes as a bigger integer is an error.
    ("int64", lambda ref, got, src: got == ("TemplateError", "integer beyond 64 bits: templates compute with int64")),
    # RenderLimits: operations, bytes made, one string's size, macro / value nesting depth.
    ("render_limits", lambda ref, got, src: got[0] == "TemplateError" and re.search(
        r"exceeds the render's limit|more text than its limit|more operations than its limit|nested more than \d+ deep", got[1])),
    # Python's own limits where radixlm computes on (10**400 as a float, deep recursion), and
    # CPython's 4300-digit limit on printing an integer, which jinja2's constant folding meets
    # at compile time in code that never runs (radixlm's integers stop at 64 bits when run).
    ("python_limits", lambda ref, got, src: (ref[0] in ("RecursionError", "MemoryError") and got[0] != "text") or
     (ref[0] == "ValueError" and "Exceeds the limit (4300 digits)" in ref[1])),
    # Printed objects that are not values: Python shows a lazy map/select as "<generator object
    # ... at 0x...>" and a list's |reverse as "<list_reverseiterator object ...>" (radixlm has no
    # generators or iterators: it prints the list), a method as "<built-in
    # method ... at 0x...>" or "<bound method ...>", a macro as "<Macro 'm'>"; radixlm prints
    # "<function name>". Addresses differ run to run; a template printing these is broken anyway.
    ("object_repr", lambda ref, got, src: ref[0] == "text" and (re.search(
        r"<(generator object|built-in method|bound method|Macro|function|list_reverseiterator object|str_ascii_iterator object) ", ref[1]) is not None or
        # ... or iterates its text (for c in d.items|string): a method named, not called
        re.search(r"\.(items|keys|values|get|lower|upper|title|capitalize|strip|lstrip|rstrip|split|rsplit|splitlines|"
                  r"replace|startswith|endswith|join|format|count|find|rfind|index|isdigit|isalpha|isalnum|isspace|"
                  r"islower|isupper)\b(?!\s*\()", src) is not None or
        re.search(r"(?<![.\w])(dict|range|namespace|raise_exception|strftime_now)\b(?!\s*\()", src) is not None)),
    # Python objects radixlm models as plain values: range() is a list (so list + range works),
    # dict.keys() / values() / items() are lists (printed as such, not as dict_keys([...])),
    # |escape gives a str (printed without Markup(...)).
    ("python_views", lambda ref, got, src: (ref[0] == "TypeError" and re.search(r"'range'|\"range\"|'generator'|'reversed'|type range", ref[1])) or
     (ref[0] == "text" and re.search(r"dict_(keys|values|items)\(|Markup\(|range\(-?\d|<reversed object", ref[1])) or
     # a range compared with a list (never equal in Python), a reversed iterator as a dict key
     re.search(r"(==|!=)\s*\(*\s*range\(|range\([^()]*\)\)*\s*(==|!=)", src) is not None or
     ("range(" in src and re.search(r"==|!=", src) is not None and ref[0] == got[0] == "text" and
      re.sub(r"True|False", "B", ref[1]) == re.sub(r"True|False", "B", got[1])) or
     (got[0] == "TypeError" and "unhashable" in got[1] and re.search(r"\|\s*reverse|range\(", src) is not None)),
    # |round(p, 'floor' / 'ceil') past p = 22: Python divides by the exact int 10**p, radixlm by
    # the nearest double (builtins.cc FRound); the last digit can differ.
    ("round_big_precision", lambda ref, got, src: re.search(r"round\(\s*(2[3-9]|[3-9]\d|\d{3,})\s*,\s*'(floor|ceil)'", src) is not None),
    # Complex numbers (a negative float to a fractional power): radixlm refuses the operation.
    ("complex", lambda ref, got, src: got[0] == "TypeError" and "complex numbers are not supported" in got[1]),
    # Markup: |escape gives jinja2 a Markup string whose operations escape their other operands
    # ('<'|e ~ '<' is '&lt;&lt;'); radixlm's escape gives a plain string (chat templates escape
    # nothing; HTML output is not their business).
    ("markup", lambda ref, got, src: re.search(r"\|\s*(e|escape|forceescape|safe)\b", src) is not None),
    # A subscript or slice of constants that raises (none[:], 7[:], [][0.2:]): jinja2's optimizer
    # folds it through getitem, which turns the TypeError into an undefined value; radixlm
    # raises, as jinja2 does when a variable is involved.
    ("constant_fold", lambda ref, got, src: ref[0] == "text" and got[0] == "TypeError" and
     ("not subscriptable" in got[1] or "slice indices" in got[1])),
    # jinja2's optimizer folds -1.5 into a constant and writes it back unparenthesised, so
    # -1.5 ** x is computed by Python as -(1.5 ** x); radixlm, as Jinja's grammar says, (-1.5) ** x.
    # The same when the operand folds to a constant first (-(100.0|round) ** 2): the outcomes
    # are then each other's negation.
    ("negative_literal_pow", lambda ref, got, src: re.search(r"-\s*\(*\s*\d[\d.e]*\s*\)*\s*\*\*", src) is not None or
     ("**" in src and ref[0] == got[0] == "text" and negated(ref[1], got[1]))),
    # str.format's spec checks ('{:_}'.format('')): radixlm formats what Python refuses.
    ("format_spec", lambda ref, got, src: ref[0] == "ValueError" and got[0] == "text" and
     re.search(r"Cannot specify|Unknown format code|format specifier|Invalid format", ref[1]) is not None),
    # A Jinja2 filter or test outside builtins.cc's tables (batch, center, ...): refused by name.
    ("unsupported_builtin", lambda ref, got, src: got[0] == "TemplateAssertionError" and any(
        re.fullmatch(r"No %s named '(.*)'\." % kind, got[1]) and re.fullmatch(r"No %s named '(.*)'\." % kind, got[1]).group(1)
        in table for kind, table in (("filter", ENV.filters), ("test", ENV.tests)))),
]


def negated(a, b):
    """a and b are the same text but for one number's sign: one has a "-" the other lacks."""
    for x, y in ((a, b), (b, a)):
        i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
        if x[i:i + 1] == "-" and x[:i] + x[i + 1:] == y and y[i:i + 1].isdigit():
            return True
    return False

# ------------------------------------------------------------------------------------ reference

class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %}: a CallBlock whose body renders through caller()."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def reference_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.fromtimestamp(NOW).strftime(fmt)
    return env


ENV = reference_env()
warnings.filterwarnings("ignore")  # the compiled templates' SyntaxWarnings


def reference(source, context):
    try:
        return ("text", ENV.from_string(source).render(**context))
    except Exception as e:  # the class is what is compared
        return (type(e).__name__, str(e))


def full_context(ctx):  # as transformers hands them: tools and documents None when absent
    return {"tools": None, "documents": None, **ctx}


def compare(ref, got, src=""):
    """None when equal, else the name of a KNOWN difference or "disagreement" (src: the template)."""
    if ref == got or (ref[0] == got[0] != "text" and ref[0] != "TemplateError"):
        return None
    for name, match in KNOWN:
        if match(ref, got, src):
            return name
    return "disagreement"


def kind(ref, got):  # what kind of disagreement: minimisation keeps it
    return (ref[0] if ref[0] != "text" else "text") + "/" + (got[0] if got[0] != "text" else "text")

# ------------------------------------------------------------------------------------ contexts

STRS = ["", "Hi", "hello world", "  padded  ", "line one\nline two\n", "Ünïcödé — 日本語 🚀", "quotes ' and \" too",
        "back\\slash", "tab\there", "CRLF\r\nend", "{\"a\": 1}", "123", " -42 ", "3.5", "1e3", "1_000", "0x1f", "ǅungla",
        "straße", "İstanbul", "ÀÉÎ", "a,b,,c", "x\u2028y", "\u00a0nbsp\u3000", "\x1cfs", "<b>&amp;</b>", "{}", "%s %d",
        "UPPER lower", "don't", "ABC123", "\u0130i", "ꞵ", "naïve café", "a" * 30]
INTS = [0, 1, -1, 2, 3, 7, 10, -13, 255, 1000, 2 ** 31, 2 ** 53 + 1, 4611686018427387904, 9223372036854775807]
FLOATS = [0.0, 0.1, -2.5, 1e16, 1e-7, 3.0, 1.5, 2.675, 1e300, -0.0, 0.30000000000000004, 123456.789, 100.0]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather — now", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
    "required": ["city"]}}}


def rand_json(r, d=0):
    k = r.randrange(7 if d < 2 else 5)
    if k == 5:
        return [rand_json(r, d + 1) for _ in range(r.randint(0, 3))]
    if k == 6:
        return {r.choice(["a", "b", "name", "role", "x y", "é", "1"]): rand_json(r, d + 1) for _ in range(r.randint(0, 3))}
    return [None, r.choice([True, False]), r.choice(INTS[:9]), r.choice(FLOATS), r.choice(STRS)][k]


def message(r, role):
    m = {"role": role, "content": r.choice(STRS)}
    if r.random() < 0.12:
        m["content"] = [{"type": "text", "text": r.choice(STRS)}] + ([{"type": "image"}] if r.random() < 0.3 else [])
    if role == "assistant" and r.random() < 0.3:
        args = {"city": r.choice(STRS), "days": r.choice(INTS[:6])}
        m["tool_calls"] = [{"id": "call_%d" % r.randrange(100), "type": "function", "function": {
            "name": "get_weather", "arguments": args if r.random() < 0.7 else json.dumps(args)}}]
        m["content"] = r.choice([None, "", m["content"]])
    if role == "assistant" and r.random() < 0.25:
        m["reasoning_content"] = r.choice(STRS)
    if role == "tool":
        m.update(tool_call_id="call_1", name="get_weather")
    return m


def context(r):
    roles = (["system"] if r.random() < 0.5 else []) + [r.choice(["user", "assistant", "user", "tool"]) for _ in range(r.randint(0, 4))]
    ctx = {"messages": [message(r, x) for x in roles], "add_generation_prompt": r.random() < 0.6,
           "bos_token": "<s>", "eos_token": "</s>", "s": r.choice(STRS), "s2": r.choice(STRS), "n": r.choice(INTS[:10]),
           "k": r.choice([0, 1, 2, 3, -1]), "f": r.choice(FLOATS), "li": [r.choice(INTS[:9]) for _ in range(r.randint(0, 4))],
           "ls": [r.choice(STRS) for _ in range(r.randint(0, 4))], "la": rand_json(r, 1) if r.random() < 0.2 else
           [rand_json(r, 1) for _ in range(r.randint(0, 4))], "d": {r.choice(["a", "b", "role", "é"]): rand_json(r, 1)
                                                                   for _ in range(r.randint(0, 3))}}
    if r.random() < 0.4:
        ctx["tools"] = [TOOL] * r.randint(1, 2)
    if r.random() < 0.5:
        ctx["enable_thinking"] = r.random() < 0.5
    return ctx

# ----------------------------------------------------------------------------------- templates

CTX_TYPES = {"s": "str", "s2": "str", "bos_token": "str", "n": "int", "k": "int", "f": "float", "li": "lint", "ls": "lstr",
             "la": "any", "d": "dict", "messages": "msgs", "add_generation_prompt": "bool", "enable_thinking": "any",
             "tools": "any"}
FMTS = ["{}", "{} and {}", "{0}-{1}-{0}", "{:>6}", "{:<4}|", "{:^7}", "{:*^9}", "{:05d}", "{:+d}", "{:,}", "{:x}", "{:#o}",
        "{:b}", "{:.2f}", "{:e}", "{:g}", "{:.3g}", "{:%}", "{!r}", "{!s}", "{a}", "{:c}", "{{}}{}", "{:_}", "{0!r:>10}"]
STRF = ["%Y-%m-%d", "%d %b %Y", "%A, %B %d", "%H:%M:%S", "%j %U %w", "%y%m%d %I %p", "%%", "%c", "%x"]


class TGen:
    def __init__(self, r):
        self.r, self.scopes, self.loops, self.fresh, self.macros = r, [dict(CTX_TYPES)], 0, 0, []

    def name(self, prefix):
        self.fresh += 1
        return "%s%d" % (prefix, self.fresh)

    def names(self, t):
        return [n for sc in self.scopes for n, tt in sc.items() if tt == t or (t == "any" and tt != "ns")]

    def lit(self, t):
        r = self.r
        if t == "str":
            s = r.choice(STRS[:16] + ["a", "b", ",", " ", "\\n"])
            q = "'" if "'" not in s or r.random() < 0.5 and '"' not in s else '"'
            return q + s.replace("\\", "\\\\").replace("\n", "\\n").replace(q, "\\" + q) + q
        if t == "int":
            return str(r.choice([0, 1, 2, 3, 5, 7, 10, 100, 65, 9223372036854775807, 4611686018427387904]))
        if t == "float":
            return r.choice(["0.5", "1.0", "2.5", "0.1", "1e3", "1.5e-7", "100.0", "3.14159", "1e16"])
        if t == "bool":
            return r.choice(["true", "false", "True", "False"])
        if t == "lint":
            return "[%s]" % ", ".join(self.lit("int") for _ in range(r.randint(0, 3)))
        if t == "lstr":
            return "[%s]" % ", ".join(self.lit("str") for _ in range(r.randint(0, 3)))
        if t == "dict":
            return "{%s}" % ", ".join("%s: %s" % (self.lit("str"), self.expr("any", 3)) for _ in range(r.randint(0, 2)))
        return r.choice(["none", "None", self.lit("str"), self.lit("int"), "(1, 'a')"] * 3 + ["undefined_name"])

    def atom(self, t):
        cands = self.names(t)
        if self.loops and t == "int":
            cands += ["loop.index", "loop.index0", "loop.revindex", "loop.revindex0", "loop.length"]
        if self.loops and t == "bool":
            cands += ["loop.first", "loop.last"]
        if self.loops and t == "any":
            cands += ["loop.previtem", "loop.nextitem", "loop.cycle('odd', 'even')"]
        return self.r.choice(cands) if cands and self.r.random() < 0.6 else self.lit(t)

    def expr(self, t, d=0):
        r = self.r
        if r.random() < 0.01 and d < 3:  # ill-typed on purpose: the errors are compared
            t = r.choice(["str", "int", "lint", "dict", "any", "bool", "float"])
        self.atomic = d >= 3 or r.random() < 0.25
        if self.atomic:
            return self.atom(t)

        def e(tt):  # an operand, parenthesised unless atomic (a postfix or an operator could bind into it)
            x = self.expr(tt, d + 1)
            return x if self.atomic else "(" + x + ")"
        forms = {
            "str": [lambda: "%s ~ %s" % (e("any"), e("any")), lambda: "%s + %s" % (e("str"), e("str")),
                    lambda: "%s|%s" % (e("str"), r.choice(["upper", "lower", "title", "capitalize", "trim", "escape", "e",
                                                            "reverse", "string", "safe", "forceescape"])),
                    lambda: "%s|replace(%s, %s%s)" % (e("str"), e("str"), e("str"), r.choice(["", ", 1", ", 0"])),
                    lambda: "%s|indent(%s)" % (e("str"), r.choice(["2", "4, true", "2, true, true", "'> '", "width=1, first=true"])),
                    lambda: "%s|join(%s)" % (e("lstr"), r.choice(["", "', '", "'\\n'"])), lambda: "%s|tojson%s" % (
                        e("any"), r.choice(["", "(indent=2)", "(sort_keys=true)", "(separators=(',', ':'))", "(ensure_ascii=true)"])),
                    lambda: "%s[%s]" % (e("str"), e("int")), lambda: "%s[%s:%s]" % (e("str"), r.choice(["", "1", "-2"]), r.choice(["", "3", "-1"])),
                    lambda: "%s[::%s]" % (e("str"), r.choice(["-1", "2", "-2"])),
                    lambda: "%s.%s(%s)" % (e("str"), r.choice(["strip", "lstrip", "rstrip"]), r.choice(["", "' '", "'a\\n'", "none"])),
                    lambda: "%s.%s()" % (e("str"), r.choice(["upper", "lower", "title", "capitalize"])),
                    lambda: "%s.replace(%s, %s)" % (e("str"), e("str"), e("str")),
                    lambda: "%r.format(%s)" % (r.choice(FMTS), ", ".join(e(r.choice(["str", "int", "float"])) for _ in range(r.randint(0, 2))))
                    if r.random() < 0.8 else "'{a}: {b!r}'.format(a=%s, b=%s)" % (e("any"), e("any")),
                    lambda: "%s|default(%s%s)" % (e("any"), e("str"), r.choice(["", ", true"])),
                    lambda: "(%s if %s else %s)" % (e("str"), e("bool"), e("str")), lambda: "%s * %s" % (e("str"), r.choice(["0", "2", "3", "-1"])),
                    lambda: "strftime_now(%r)" % r.choice(STRF), lambda: "%s|first" % e("lstr"), lambda: "%s|last" % e("str"),
                    lambda: "%s[%r]" % (e("msg"), r.choice(["role", "content"])), lambda: "%s.content" % e("msg"),
                    lambda: "%s|string" % e("any"), lambda: "%s|dictsort|string" % e("dict"),
                    lambda: "%s|map('upper')|join('|')" % e("lstr"), lambda: "%s.join(%s)" % (e("str"), e("lstr")),
                    lambda: "%s|min" % e("lstr"), lambda: "%s|max(case_sensitive=true)" % e("lstr")],
            "int": [lambda: "%s %s %s" % (e("int"), r.choice(["+", "-", "*", "//", "%"]), e("int")),
                    lambda: "%s ** %s" % (e("int"), r.choice(["0", "2", "3", "-1", "63"])), lambda: "-%s" % e("int"),
                    lambda: "%s|length" % e(r.choice(["str", "lint", "dict", "msgs"])), lambda: "%s|count" % e("lstr"),
                    lambda: "%s|int%s" % (e(r.choice(["str", "float"])), r.choice(["", "(-1)", "(default=7)"])),
                    lambda: "%s|abs" % e("int"), lambda: "%s|sum" % e("lint"), lambda: "%s|%s" % (e("lint"), r.choice(["min", "max", "first", "last"])),
                    lambda: "%s.%s(%s)" % (e("str"), r.choice(["find", "rfind", "count", "index"]), e("str")),
                    lambda: "%s.%s(%s)" % (e("lint"), r.choice(["index", "count"]), e("int")), lambda: "%s|wordcount" % e("str"),
                    lambda: "range(%s)|length" % e("int"), lambda: "%s|round|int" % e("float"), lambda: "(%s, %s)[%s]" % (e("int"), e("int"), r.choice(["0", "1", "-1"]))],
            "float": [lambda: "%s / %s" % (e(r.choice(["int", "float"])), e(r.choice(["int", "float"]))),
                      lambda: "%s %s %s" % (e("float"), r.choice(["+", "-", "*", "//", "%", "**"]), e(r.choice(["int", "float"]))),
                      lambda: "%s|float%s" % (e(r.choice(["str", "int"])), r.choice(["", "(1.5)"])),
                      lambda: "%s|round%s" % (e("float"), r.choice(["", "(2)", "(1, 'floor')", "(0, 'ceil')", "(-1)"])),
                      lambda: "%s|abs" % e("float"), lambda: "-%s" % e("float")],
            "bool": [lambda: "%s %s %s" % (e(t2), r.choice(["==", "!=", "<", ">", "<=", ">="]), e(t2)) for t2 in [r.choice(["int", "str", "float", "lint"])]] +
                    [lambda: "%s %s %s" % (e("any"), r.choice(["in", "not in"]), e(r.choice(["lint", "lstr", "str", "dict"]))),
                     lambda: "not %s" % e("bool"), lambda: "%s %s %s" % (e("bool"), r.choice(["and", "or"]), e("any")),
                     lambda: "%s is %s%s" % (e("any"), r.choice(["", "not "]), r.choice([
                         "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
                         "boolean", "true", "false", "callable", "lower", "upper", "sameas 1", "eq 1", "ne 'a'", "lt 3", "gt 0",
                         "le 1", "ge 2", "in [1, 'a']", "equalto 2", "greaterthan 1", "lessthan 1"])),
                     lambda: "%s is %s" % (e("int"), r.choice(["odd", "even", "divisibleby 3", "divisibleby(0)", "divisibleby(-1)"])),
                     lambda: "%s.%s(%s)" % (e("str"), r.choice(["startswith", "endswith"]), r.choice([e("str"), "(%s, %s)" % (e("str"), e("str"))])),
                     lambda: "%s.%s()" % (e("str"), r.choice(["isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"]))],
            "lint": [lambda: "range(%s)" % r.choice(["3", "0", "%s" % e("int"), "1, 5", "5, 0, -2", "0, 10, 3"]),
                     lambda: "%s|sort%s" % (e("lint"), r.choice(["", "(reverse=true)", "(true)"])),
                     lambda: "%s|%s|list" % (e("lint"), r.choice(["reverse", "unique", "list"])),
                     lambda: "%s|%s(%s)|list" % (e("lint"), r.choice(["select", "reject"]), r.choice(["", "'odd'", "'even'", "'divisibleby', 2", "'gt', 1", "'none'", "'>=', 2", "'==', 0", "'!=', 1"])),
                     lambda: "%s + %s" % (e("lint"), e("lint")), lambda: "%s * 2" % e("lint"), lambda: "%s[%s:]" % (e("lint"), e("int")),
                     lambda: "%s|map('int')|list" % e("lstr"), lambda: "%s|map('abs')|list" % e("lint")],
            "lstr": [lambda: "%s.%s(%s)" % (e("str"), r.choice(["split", "rsplit"]), r.choice(["", "','", "' ', 1", "none, 1", "'a', -1"])),
                     lambda: "%s.splitlines()" % e("str"), lambda: "%s|list" % e("str"),
                     lambda: "%s|sort%s|list" % (e("lstr"), r.choice(["", "(case_sensitive=true)", "(reverse=true)"])),
                     lambda: "%s|map(%s)|list" % (e("lstr"), r.choice(["'upper'", "'trim'", "'length'", "'string'", "'tojson'", "'replace', 'a', 'b'"])),
                     lambda: "%s|map(attribute='role')|list" % e("msgs"), lambda: "%s.keys()|list" % e("dict"),
                     lambda: "%s|unique(case_sensitive=false)|list" % e("lstr"), lambda: "%s|reject('equalto', '')|list" % e("lstr")],
            "dict": [lambda: "dict(a=%s, b=%s)" % (e("any"), e("any")), lambda: "%s" % e("msg"),
                     lambda: "{%s: %s, 'b': %s}" % (e("str"), e("any"), e("any"))],
            "msgs": [lambda: "%s|selectattr(%s)|list" % (e("msgs"), r.choice(["'role', 'equalto', 'user'", "'content'", "'tool_calls', 'defined'", "'role', 'in', ['user', 'tool']"])),
                     lambda: "%s|rejectattr('role', 'eq', 'system')|list" % e("msgs"), lambda: "%s[%s:]" % (e("msgs"), r.choice(["1", "-2", ":-1"])),
                     lambda: "%s|sort(attribute='role')" % e("msgs"), lambda: "%s|reverse|list" % e("msgs")],
            "msg": [lambda: "%s[%s]" % (e("msgs"), r.choice(["0", "-1", "1"])), lambda: "%s|first" % e("msgs"), lambda: "%s|last" % e("msgs")],
            "any": [lambda: e(r.choice(["str", "int", "float", "bool", "lint", "lstr", "dict", "msg"])),
                    lambda: "%s.get(%s%s)" % (e("dict"), e("str"), r.choice(["", ", 0"])), lambda: "%s.%s" % (e("dict"), r.choice(["a", "role", "missing", "items"])),
                    lambda: "%s[%s]" % (e("lint"), e("int")), lambda: "%s|items|list" % e("dict"),
                    lambda: "%s|dictsort(%s)" % (e("dict"), r.choice(["", "true", "by='value'", "reverse=true"])), lambda: "(%s, %s)" % (e("any"), e("any")),
                    lambda: "%s or %s" % (e("any"), e("any")), lambda: "%s and %s" % (e("any"), e("any")), lambda: "%s|attr(%r)" % (e("msg"), "role"),
                    lambda: "%s|items|first" % e("dict")],
        }
        x = r.choice(forms.get(t, forms["any"]))()
        self.atomic = False
        return x

    def tag(self, body):
        r = self.r
        return "{%" + r.choice(["", "", "", "-", "+"]) + " " + body + " " + r.choice(["", "", "", "-", "+"]) + "%}"

    def text(self):
        return self.r.choice(["", "", "\n", "  ", "x", " y ", "\n  ", "line\n", "\t", "\n\n", "a}b", "{ }"])

    def block(self, d):
        r, out = self.r, []
        for _ in range(r.randint(1, 4 if d < 2 else 2)):
            out.append(self.text())
            k = r.random()
            if k < 0.3 or d >= 3:
                out.append("{{" + r.choice(["", "", "-"]) + " " + self.expr(r.choice(["str", "str", "int", "float", "bool", "any", "lstr", "dict"])) + " " + r.choice(["", "", "-"]) + "}}")
            elif k < 0.42:
                out.append(self.tag("if " + self.expr("bool")) + self.block(d + 1))
                if r.random() < 0.3:
                    out.append(self.tag("elif " + self.expr("any")) + self.block(d + 1))
                if r.random() < 0.4:
                    out.append(self.tag("else") + self.block(d + 1))
                out.append(self.tag("endif"))
            elif k < 0.56:
                self.for_loop(d, out)
            elif k < 0.68:
                t = r.choice(["str", "int", "lint", "any", "bool"])
                v = self.name("v")
                if r.random() < 0.15:
                    v2 = self.name("v")
                    out.append(self.tag("set %s, %s = %s" % (v, v2, r.choice(["(1, 'a')", self.expr("lstr"), "%s|items|first" % self.expr("dict")]))))
                    self.scopes[-1][v2] = "any"
                    t = "any"
                else:
                    out.append(self.tag("set %s = %s" % (v, self.expr(t))))
                self.scopes[-1][v] = t
            elif k < 0.74:
                ns = self.name("ns")
                out.append(self.tag("set %s = namespace(c=%s, t=%s)" % (ns, self.expr("int"), self.expr("str"))))
                self.scopes[0][ns + ".c"], self.scopes[0][ns + ".t"] = "int", "str"
            elif k < 0.8 and self.names("int") and any("." in n for n in self.names("int")):
                n = r.choice([n for n in self.names("int") if "." in n and not n.startswith("loop")])
                out.append(self.tag("set %s = %s + 1" % (n, n)))
            elif k < 0.85:
                v = self.name("v")
                out.append(self.tag("set " + v) + self.block(d + 1) + self.tag("endset"))
                self.scopes[-1][v] = "str"
            elif k < 0.9:
                self.macro(d, out)
            elif k < 0.94:
                out.append(self.tag("generation") + self.block(d + 1) + self.tag("endgeneration"))
            elif k < 0.97 and self.loops:
                out.append(self.tag(r.choice(["if " + self.expr("bool") + " %}{% break %}{% endif", "break", "continue",
                                              "if loop.first %}{% continue %}{% endif"])))
            elif k < 0.985:
                out.append("{# note " + self.text() + " #}")
            else:
                out.append(r.choice(["{% raw %}", "{%- raw -%}"]) + "{{ x }}{% y %}" + r.choice(["{% endraw %}", "{%- endraw -%}"]))
        out.append(self.text())
        return "".join(out)

    def for_loop(self, d, out):
        r = self.r
        lt = r.choice(["lint", "lstr", "msgs", "dict", "str", "items"])
        x = self.name("x")
        if lt == "items":
            y = self.name("x")
            head, binds = "%s, %s in %s" % (x, y, self.expr("dict") + r.choice(["|items", ".items()", "|dictsort"])), {x: "str", y: "any"}
        else:
            head = "%s in %s" % (x, self.expr(lt))
            binds = {x: {"lint": "int", "lstr": "str", "msgs": "msg", "dict": "str", "str": "str"}[lt]}
        self.scopes.append(binds)
        if r.random() < 0.2:
            head += " if " + self.expr("bool")
        self.loops += 1
        out.append(self.tag("for " + head) + self.block(d + 1))
        self.loops -= 1
        if r.random() < 0.25:
            out.append(self.tag("else") + self.block(d + 1))
        out.append(self.tag("endfor"))
        self.scopes.pop()

    def macro(self, d, out):
        r = self.r
        m, p, q = self.name("m"), self.name("p"), self.name("p")
        saved, self.loops = self.loops, 0
        self.scopes.append({p: "any", q: "str"})
        out.append(self.tag("macro %s(%s, %s=%s)" % (m, p, q, self.lit("str"))) + self.block(d + 1) + self.tag("endmacro"))
        self.scopes.pop()
        self.loops = saved
        for _ in range(r.randint(1, 2)):
            out.append("{{ %s(%s) }}" % (m, r.choice(["", self.expr("any"), "%s, %s" % (self.expr("any"), self.expr("str")),
                                                      "%s, %s=%s" % (self.expr("any"), q, self.expr("str"))] * 4 + ["1, 2, 3", "zz=1"])))

    def template(self):
        return self.block(0)

# ---------------------------------------------------------------------------------- the engine

class Engine(CaseRunner):
    """cases: [(template, context)] through `radixlm template cases`; outcomes as ("text", s) or
    (error class, message)."""

    def __init__(self, binary, case_timeout, workdir):
        super().__init__(binary, ["template", "cases", "--input"], case_timeout, 0.5, workdir)

    def run(self, cases):
        results, status, detail = self.run_lines(
            [{"template": src, "context": full_context(ctx), "now": NOW} for src, ctx in cases])
        got = [("text", r["text"]) if "text" in r else (r.get("error", "?"), r.get("message", "")) for r in results]
        return got, status, detail

# --------------------------------------------------------------------------------- minimisation

TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
TOKEN = re.compile(r"\s+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\d+(?:\.\d+)?(?:e[+-]?\d+)?|\w+|\*\*|//|[=!<>]=|.", re.S)
OPENERS = {"if": "endif", "for": "endfor", "macro": "endmacro", "generation": "endgeneration", "raw": "endraw", "set": "endset"}


def segments(src):
    out, at = [], 0
    for m in TAG.finditer(src):
        if m.start() > at:
            out.append(src[at:m.start()])
        out.append(m.group())
        at = m.end()
    if at < len(src):
        out.append(src[at:])
    return out


def word(seg):
    m = re.match(r"\{%[-+]?\s*(\w+)", seg)
    if not m:
        return None
    w = m.group(1)
    return None if w == "set" and "=" in seg.split("%}")[0] else w  # `set x = e` has no end tag


def template_reductions(src):
    segs = segments(src)
    join = lambda parts: "".join(parts)
    cands, stack, pairs, middles = [], [], [], {}
    for i, s in enumerate(segs):
        w = word(s)
        if w in OPENERS:
            stack.append((i, w))
        elif w in ("elif", "else") and stack:
            middles.setdefault(stack[-1][0], []).append(i)
        elif w and w.startswith("end") and stack and OPENERS.get(stack[-1][1]) == w:
            pairs.append((stack.pop()[0], i))
    for i, j in sorted(pairs, key=lambda p: p[0] - p[1]):  # largest blocks first
        cands.append(join(segs[:i] + segs[j + 1:]))
        marks = [i] + middles.get(i, []) + [j]
        for a, b in zip(marks[1:-1], marks[2:]):  # an elif / else branch dropped
            cands.append(join(segs[:a] + segs[b:]))
        for a, b in zip(marks, marks[1:]):  # one branch's body, unwrapped
            cands.append(join(segs[:i] + segs[a + 1:b] + segs[j + 1:]))
    structural = {k for p in pairs for k in p} | {m for ms in middles.values() for m in ms}
    for i, s in enumerate(segs):
        if i not in structural:
            cands.append(join(segs[:i] + segs[i + 1:]))
            if not s.startswith("{") and len(s) > 1:
                cands += [join(segs[:i] + [s[:len(s) // 2]] + segs[i + 1:]), join(segs[:i] + [s[1:]] + segs[i + 1:])]
    for i, s in enumerate(segs):  # expression tokens: drop spans of 1-3, or keep one parenthesised part
        m = re.match(r"(\{[{%][-+]?\s*)(.*?)(\s*[-+]?[}%]\})$", s, re.S)
        if not m or word(s) in ("endif", "endfor", "else", "endmacro", "endset", "endgeneration", "raw", "endraw"):
            continue
        toks = TOKEN.findall(m.group(2))
        if len(toks) > 80:
            continue
        first = 1 if s.startswith("{%") else 0  # a statement keeps its keyword
        for n in (3, 2, 1):
            for a in range(first, len(toks) - n + 1):
                if not toks[a].isspace():
                    cands.append(join(segs[:i] + [m.group(1) + "".join(toks[:a] + toks[a + n:]) + m.group(3)] + segs[i + 1:]))
    seen, out = {src}, []
    for c in cands:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def value_reductions(x):
    """Smaller variants of a JSON value: members and elements dropped, strings shortened, children hoisted."""
    out = []
    if isinstance(x, dict):
        for k, v in x.items():
            out.append({kk: vv for kk, vv in x.items() if kk != k})
            out += [dict(x, **{k: c}) for c in value_reductions(v)]
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out.append(x[:i] + x[i + 1:])
            out += [x[:i] + [c] + x[i + 1:] for c in value_reductions(v)]
    elif isinstance(x, str) and x:
        out += [c for c in ("", x[:len(x) // 2], x[1:], x[:-1]) if c != x]
    elif isinstance(x, (int, float)) and not isinstance(x, bool) and x not in (0, 1):
        out += [0, 1]
    return out


def minimise(engine, cls, src, ctx, want_kind, deadline):
    """Greedy delta debugging: the smallest one-step reduction (of the template, then of the
    context) that keeps the same kind of disagreement, until none does."""
    def first_hit(cands):
        got, status, _ = engine.run(cands)
        if cls in ("crash", "hang"):
            return cands[len(got)] if status == cls and len(got) < len(cands) else None
        for c, g in zip(cands, got):
            ref = reference(c[0], full_context(c[1]))
            if compare(ref, g, c[0]) == "disagreement" and kind(ref, g) == want_kind:
                return c
        return None
    for stage in ("template", "context"):
        while time.time() < deadline:
            if stage == "template":
                cands = sorted(((t, ctx) for t in template_reductions(src)), key=lambda c: len(c[0]))
            else:
                # Variables the template names keep existing (else the disagreement drifts to Undefined).
                used = set(re.findall(r"\w+", src))
                cands = sorted(((src, c) for c in value_reductions(ctx) if isinstance(c, dict) and used & set(ctx) <= set(c)),
                               key=lambda c: len(json.dumps(c[1])))
            hit = None
            for i in range(0, len(cands), 60):
                hit = first_hit(cands[i:i + 60])
                if hit or time.time() > deadline:
                    break
            if not hit:
                break
            src, ctx = hit
    return src, ctx


def signature(k, src):
    feats = {w for w in re.findall(r"\{%[-+]?\s*(\w+)", src) if not w.startswith("end") and w not in ("else", "elif")}
    feats |= {"CR"} if "\r" in src else set()
    feats |= {"|" + f for f in re.findall(r"\|\s*(\w+)", src)}
    feats |= {"is " + t for t in re.findall(r"\bis\s+(?:not\s+)?(\w+)", src)}
    feats |= {"." + m for m in re.findall(r"\.(\w+)\s*\(", src)}
    feats |= {g for g in ("range", "namespace", "dict", "strftime_now", "raise_exception", "loop.") if g in src}
    return k + ":" + ",".join(sorted(feats))

# ------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("radixlm")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/fuzz-findings/template")
    ap.add_argument("--templates", default=os.path.join(os.environ.get("RADIXLM_SHARED_DATA", "/work/shared/data"), "chat_templates"))
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--max-findings", type=int, default=50)
    ap.add_argument("--case-timeout", type=float, default=30)
    ap.add_argument("--minimise-seconds", type=float, default=90)
    a = ap.parse_args()
    start = time.time()
    deadline = start + a.seconds
    rng = random.Random(a.seed)
    real = []
    if os.path.isdir(a.templates):
        for name in sorted(os.listdir(a.templates)):
            if name.endswith(".jinja"):
                with open(os.path.join(a.templates, name), encoding="utf-8") as f:
                    real.append((name, f.read()))
    os.makedirs(a.out, exist_ok=True)
    seen = set()
    for name in os.listdir(a.out):
        if name.startswith("finding-") and name.endswith(".json"):
            with open(os.path.join(a.out, name), encoding="utf-8") as f:
                seen.add(json.load(f).get("signature"))
    next_id = len([n for n in os.listdir(a.out) if n.startswith("finding-")]) + 1
    stats = {"cases": 0, "generated": 0, "real": 0, "rendered": 0, "raised": 0}
    disagreements, known, saved, minimised_pre = {}, {}, [], set()
    work = tempfile.mkdtemp(prefix="template_diff_")
    atexit.register(shutil.rmtree, work, True)  # its copy of the binary too
    engine = Engine(a.radixlm, a.case_timeout, work)

    def save(cls, src, ctx, ref, got, origin, detail=None):
        nonlocal next_id
        sig = signature(kind(ref, got) if cls == "disagreement" and got else cls, src)
        if sig in seen:
            return
        seen.add(sig)
        rec = {"class": cls, "template": src, "context": ctx, "reference": list(ref) if ref else None,
               "radixlm": list(got) if got else None, "seed": a.seed, "origin": origin, "signature": sig}
        if detail:
            rec["detail"] = detail
        path = os.path.join(a.out, "finding-%03d.json" % next_id)
        next_id += 1
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, indent=1)
        saved.append(path)
        print("finding %s: %s" % (path, sig), flush=True)

    def examine(cases, refs, got):
        todo = []
        for (src, ctx, origin), ref, g in zip(cases, refs, got):
            stats["cases"] += 1
            stats["rendered" if ref[0] == "text" else "raised"] += 1
            c = compare(ref, g, src)
            if c is None:
                continue
            if c != "disagreement":
                known[c] = known.get(c, 0) + 1
                continue
            k = kind(ref, g)
            disagreements[k] = disagreements.get(k, 0) + 1
            pre = signature(k, src) if origin == "generated" else k + origin  # once per kind and real template
            if pre not in minimised_pre:
                todo.append((k.count("text"), -len(todo), pre, src, ctx, origin, k))
        # Three a batch, the most telling first: different texts, then text against an error.
        for _, _, pre, src, ctx, origin, k in sorted(todo, reverse=True)[:3]:
            minimised_pre.add(pre)
            if len(saved) >= a.max_findings:
                return
            ms, mc = minimise(engine, "disagreement", src, ctx, k, min(time.time(), deadline) + a.minimise_seconds)
            got, _, _ = engine.run([(ms, mc)])
            save("disagreement", ms, mc, reference(ms, full_context(mc)), got[0] if got else None, origin)

    while time.time() < deadline and len(saved) < a.max_findings:
        cases = []
        for _ in range(a.batch):
            ctx = context(rng)
            if real and rng.random() < 0.25:
                name, src = rng.choice(real)
                cases.append((src, ctx, name))
                stats["real"] += 1
            else:
                cases.append((TGen(rng).template(), ctx, "generated"))
                stats["generated"] += 1
        refs = [reference(src, full_context(ctx)) for src, ctx, _ in cases]
        while cases:
            got, status, detail = engine.run([(s, c) for s, c, _ in cases])
            examine(cases[:len(got)], refs[:len(got)], got)
            if not status:
                break
            bad = cases[len(got)]
            disagreements[status] = disagreements.get(status, 0) + 1
            _, alone, detail1 = engine.run([bad[:2]])
            if alone == status:
                ms, mc = minimise(engine, status, bad[0], bad[1], None, min(time.time(), deadline) + a.minimise_seconds)
                save(status, ms, mc, reference(ms, full_context(mc)), None, bad[2], detail1)
            else:
                save(status, bad[0], bad[1], refs[len(got)], None, bad[2], "not reproduced alone: " + detail)
            refs = refs[len(got) + 1:]
            cases = cases[len(got) + 1:]
    summary = {"seconds": round(time.time() - start, 1), "seed": a.seed, **stats, "known_differences": known,
               "disagreements": disagreements, "findings_saved": len(saved), "findings": saved, "engine_runs": engine.calls}
    print(json.dumps(summary, ensure_ascii=False))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())

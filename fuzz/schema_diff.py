#!/usr/bin/python3
"""Differential fuzzer: radixlm's JSON Schema compiler against python3-jsonschema.

What it compares. Random JSON Schemas (drafts 04, 06, 07, 2020-12; each schema one draft, small,
nesting <= 4) and, per schema, random instances near its boundary (values generated to satisfy
it, mutations of them, random JSON). `radixlm grammar --check-cases` says whether the schema's
grammar accepts each instance (compact and Python json.dumps text, any member order);
python3-jsonschema (Debian's 4.10.3, format assertion on) gives the verdict. The compiler's
contract (src/grammar/json_schema.h) is "exact or refuses", up to deliberate narrowings.

    /usr/bin/python3 fuzz/schema_diff.py build/src/cli/radixlm --seconds 60 --seed 1
    /usr/bin/python3 fuzz/schema_diff.py RADIXLM --seconds 14400 --out /tmp/fuzz-findings/schema
    options: --batch K (schemas per checker run), --max-findings M, --cross-draft (also draw
    keywords from other drafts than the schema's $schema: see "draft vocabulary" below)

Findings. valid_rejected (valid per the reference, and not only under a narrowing, yet some
serialisation rejected), invalid_accepted (invalid, yet accepted), crash (the checker died),
hang (a case took over --case-timeout). Each is minimised (schema and instance delta-debugged
while the same class persists), deduplicated by signature (class + the minimised schema's
keywords + its format names) and written to OUT/finding-NNN.json {"class", "schema",
"instance", "verdict", "accept", "seed"}. Refusals (compiled=false) are not disagreements:
they are counted by the keyword the error names. Exit status 1 when anything was found.

The reference, adjusted where Debian's jsonschema is not JSON Schema (each a documented choice):
  - formats whose checker needs a package Debian lacks (date-time and time: rfc3339-validator;
    uri, uri-reference: rfc3987) get the checker jsonschema would use, written here, in the
    drafts jsonschema registers them for; date is RFC 3339 full-date (Python 3.11's
    date.fromisoformat also takes 20250115 and 2025-W03-1), uuid the 8-4-4-4-12 hex form
    (uuid.UUID also strips braces and "urn:uuid:");
  - pattern / patternProperties use ECMA-262 semantics (JSON Schema's regex dialect): \\d \\w are
    ASCII, \\s is ECMAScript's white space, `.` excludes line terminators, `$` is the very end
    (Python's `re` differs on all four);
  - enum compares with jsonschema's own `equal` (its enum says [True] == [1]).
Narrowings (json_schema.h) are a second validator: a valid instance that only the narrowed one
rejects is counted as "narrowing", never a finding: integers written without fraction (3.0 for
"integer", or under multipleOf), enum/const literals in their own type (1.0 for const 1), no exponent under number
bounds, email as local@domain.tld, uri without IP-literal hosts, and the date, time, uuid,
uri-reference and idn-email formats checked in every draft (keywords a draft does not have,
such as const in draft 4, are ignored there, as jsonschema ignores them).
"""
import argparse, atexit, calendar, copy, decimal, json, os, random, re, shutil, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case_runner import CaseRunner  # noqa: E402
try:
    import jsonschema
    from jsonschema import _legacy_validators, _utils
except ImportError as e:  # the test suite runs this where Debian's module may be missing
    print("SKIPPED: %s (scripts/setup.sh installs it)" % e)
    sys.exit(77)

DRAFTS = {"4": "http://json-schema.org/draft-04/schema#", "6": "http://json-schema.org/draft-06/schema#",
          "7": "http://json-schema.org/draft-07/schema#", "2020": "https://json-schema.org/draft/2020-12/schema"}
NAMES = ["a", "ab", "b", "name", "nam", "id", "x_1", "tags", "é", "k y", "q\"t", "Name", "aa", "l\nb"]
# patternProperties patterns the compiler reads without a regex (every name; names on one line).
KEY_PATTERNS = ["", ".*", "^.*", "^.*$", "^(.*)$"]
STRINGS = ["", "a", "ab", "abc", "hello", "A1", "x y", "é", "日本", "🚀", "a\nb", "q\"t", "\\", "0", "12", "-3",
           "2024-02-29", "12:30:00Z", "a@b.co", "http://x.org/p?q#f", "1.2.3.4", "true", "null", " ", "\t"]
FORMATS = {"4": ["date-time", "email", "ipv4", "uri", "hostname", "int32"],
           "6": ["date-time", "email", "ipv4", "uri", "uri-reference", "json-pointer"],
           "7": ["date", "time", "date-time", "email", "ipv4", "uri", "uri-reference", "idn-email", "ipv6"],
           "2020": ["date", "time", "date-time", "uuid", "email", "ipv4", "uri", "uri-reference", "duration", "double"]}

# ------------------------------------------------------------------------------------ reference

WS = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
ESC_CLASS = {"d": "0-9", "w": "A-Za-z0-9_", "s": WS}


def ecma_to_py(p):
    """ECMAScript regex (the subset generated here) -> Python re text with ECMAScript meaning."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            if i + 1 >= len(p):
                raise ValueError("trailing backslash")
            e = p[i + 1]
            i += 2
            if e.lower() in ESC_CLASS:
                body = ESC_CLASS[e.lower()]
                if in_class:
                    if e.isupper():
                        raise ValueError("negated class escape inside a class")
                    out.append(body)
                else:
                    out.append("[%s%s]" % ("^" if e.isupper() else "", body))
            elif e in "bBpPk123456789c":
                raise ValueError("unsupported escape \\" + e)
            else:
                out.append("\\" + e)
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if p[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if p[i + 1:i + 2] == "]":
                raise ValueError("empty class")
        elif c == ".":
            out.append("[^\n\r\u2028\u2029]")
        elif c == "$":
            out.append(r"(?!(?s:.))")
        elif p.startswith("(?<", i) and p[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(c)
        i += 1
    return re.compile("".join(out))


def ecma_search(pattern, s):
    return ecma_to_py(pattern).search(s) is not None


DATE_TIME = re.compile(r"(\d{4})-(0[1-9]|1[0-2])-(\d{2})T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
                       r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)", re.ASCII)
_U, _S, _P = r"A-Za-z0-9\-._~", r"!$&'()*+,;=", r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_U}{_S}:@]|{_P})"
_AUTH = (rf"(?:(?:[{_U}{_S}:]|{_P})*@)?(?:\[(?:[0-9A-Fa-f:.]+|v[0-9A-Fa-f]+\.[{_U}{_S}:]+)\]|(?:[{_U}{_S}]|{_P})*)"
         r"(?::[0-9]*)?")
_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
URI = re.compile(rf"[A-Za-z][A-Za-z0-9+\-.]*:(?://{_AUTH}{_ABEMPTY}|/(?:{_PCHAR}+{_ABEMPTY})?|{_PCHAR}+{_ABEMPTY}|){_TAIL}")
RELREF = re.compile(rf"(?://{_AUTH}{_ABEMPTY}|/(?:{_PCHAR}+{_ABEMPTY})?|(?:[{_U}{_S}@]|{_P})+{_ABEMPTY}|){_TAIL}")
EMAIL_NARROW = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+")


def is_date_time(s):
    m = DATE_TIME.fullmatch(s.upper())
    if not m or int(m.group(1)) == 0:
        return False
    return 1 <= int(m.group(3)) <= calendar.monthrange(int(m.group(1)), int(m.group(2)))[1]


def is_date(s):
    return is_date_time(s + "T00:00:00Z") and len(s) == 10


def add_formats(checker, draft, narrow):
    def put(name, fn, drafts=("4", "6", "7", "2020")):
        if draft in drafts:
            checker.checkers[name] = (lambda x: not isinstance(x, str) or fn(x), ())
    put("date-time", is_date_time)
    put("time", lambda s: is_date_time("1970-01-01T" + s), ("7", "2020"))
    put("date", is_date, ("7", "2020"))
    put("uuid", lambda s: re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", s, re.ASCII), ("2020",))
    put("uri", lambda s: URI.fullmatch(s) and not (narrow and "[" in s))
    put("uri-reference", lambda s: (URI.fullmatch(s) or RELREF.fullmatch(s)) and not (narrow and "[" in s), ("6", "7", "2020"))
    if narrow:
        put("email", EMAIL_NARROW.fullmatch)
        put("idn-email", EMAIL_NARROW.fullmatch)
        # Later drafts' formats are checked whatever the draft (json_schema.h's narrowings).
        put("time", lambda s: is_date_time("1970-01-01T" + s))
        put("date", is_date)
        put("uuid", lambda s: re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", s, re.ASCII))
        put("uri-reference", lambda s: (URI.fullmatch(s) or RELREF.fullmatch(s)) and "[" not in s)


def strict_equal(a, b):  # same JSON text up to member order: 1 and 1.0 differ, as literals do
    if type(a) != type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(strict_equal, a, b))
    return a == b


def exponent_form(x):  # nlohmann's dump writes this float with an exponent (radixlm's feeder does)
    return isinstance(x, float) and x != 0 and not (-5 < decimal.Decimal(repr(abs(x))).adjusted() < 15)


def make_validators(schema):
    """(reference, narrowed) validator instances for one schema."""
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    draft = {jsonschema.Draft4Validator: "4", jsonschema.Draft6Validator: "6", jsonschema.Draft7Validator: "7"}.get(base, "2020")

    def pattern(v, p, inst, s):
        if isinstance(inst, str) and not ecma_search(p, inst):
            yield jsonschema.ValidationError("%r does not match %r" % (inst, p))

    def pattern_properties(v, pp, inst, s):
        if isinstance(inst, dict):
            for p, sub in pp.items():
                for k, x in inst.items():
                    if ecma_search(p, k):
                        yield from v.descend(x, sub, path=k, schema_path=p)

    def additional_properties(v, ap, inst, s):  # jsonschema's, with ECMAScript patterns
        if not isinstance(inst, dict):
            return
        extras = [k for k in inst if k not in s.get("properties", {}) and
                  not any(ecma_search(p, k) for p in s.get("patternProperties", {}))]
        if isinstance(ap, dict):
            for k in extras:
                yield from v.descend(inst[k], ap, path=k)
        elif ap is False and extras:
            yield jsonschema.ValidationError("additional properties %r" % extras)

    def additional_items(v, ai, inst, s):  # jsonschema's sorts the extras for its message: None < 1 raises
        if isinstance(inst, list) and isinstance(s.get("items"), list):
            n = len(s["items"])
            if ai is False and len(inst) > n:
                yield jsonschema.ValidationError("additional items")
            elif isinstance(ai, dict):
                for i, x in enumerate(inst[n:], n):
                    yield from v.descend(x, ai, path=i)

    def enum(v, values, inst, s):
        if not any(_utils.equal(inst, e) for e in values):
            yield jsonschema.ValidationError("%r is not one of %r" % (inst, values))

    def make(narrow):
        vals = dict(base.VALIDATORS, pattern=pattern, patternProperties=pattern_properties,
                    additionalProperties=additional_properties, enum=enum)
        if "additionalItems" in vals:
            vals["additionalItems"] = additional_items
        tc = base.TYPE_CHECKER
        if narrow:
            tc = tc.redefine("integer", lambda c, x: isinstance(x, int) and not isinstance(x, bool))

            def strict(fn):
                def check(v, value, inst, s):
                    yield from fn(v, value, inst, s)
                    if exponent_form(inst):
                        yield jsonschema.ValidationError("narrowing: exponent under a bound")
                return check
            def whole(fn):  # multipleOf: numbers written as integers
                def check(v, value, inst, s):
                    yield from fn(v, value, inst, s)
                    if isinstance(inst, float):
                        yield jsonschema.ValidationError("narrowing: a multiple written with a fraction")
                return check
            vals["multipleOf"] = whole(vals["multipleOf"])
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if k in vals and (draft != "4" or k in ("minimum", "maximum")):
                    vals[k] = strict(vals[k])
            vals["enum"] = lambda v, e, inst, s: (jsonschema.ValidationError("narrowing: literal")
                                                  for _ in [0] if not any(strict_equal(inst, x) for x in e))
            if "const" in vals:
                vals["const"] = lambda v, c, inst, s: (jsonschema.ValidationError("narrowing: literal")
                                                       for _ in [0] if not strict_equal(inst, c))
        fc = jsonschema.FormatChecker(formats=())
        fc.checkers = dict(base.FORMAT_CHECKER.checkers)
        add_formats(fc, draft, narrow)
        kw = {}
        if draft != "2020":  # jsonschema.validators.extend drops this: $ref siblings ignored in drafts <= 7
            kw["applicable_validators"] = _legacy_validators.ignore_ref_siblings
        cls = jsonschema.validators.create(meta_schema=base.META_SCHEMA, validators=vals, type_checker=tc,
                                           format_checker=fc, id_of=base.ID_OF, **kw)
        # Without $schema: jsonschema's evolve() re-picks the class from a subschema's $schema,
        # so a "$ref": "#" would leave this validator (and its narrowings) for the stock one.
        bare = {k: x for k, x in schema.items() if k != "$schema"} if isinstance(schema, dict) else schema
        return cls(bare, format_checker=fc)
    return make(False), make(True), draft


def verdicts(schema, instances):
    """[(valid, narrowed_valid) or None when the reference cannot decide] per instance."""
    try:
        ref, nar, _ = make_validators(schema)
    except Exception:
        return [None] * len(instances)
    out = []
    for x in instances:
        try:
            out.append((ref.is_valid(x), nar.is_valid(x)))
        except Exception:  # unresolvable $ref, an unsupported regex, recursion: undecided
            out.append(None)
    return out


def schema_ok(schema):
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        json.dumps(schema, allow_nan=False)
        return True
    except Exception:
        return False


def serialisable(x):
    try:
        json.dumps(x, allow_nan=False)
    except (ValueError, TypeError):
        return False
    def ok(v):
        if isinstance(v, bool) or v is None or isinstance(v, float):
            return True
        if isinstance(v, int):
            return -2 ** 63 <= v < 2 ** 63
        if isinstance(v, str):
            return not any(0xD800 <= ord(c) <= 0xDFFF for c in v)
        if isinstance(v, list):
            return all(map(ok, v))
        return all(ok(k) and ok(w) for k, w in v.items())
    return ok(x)

# ------------------------------------------------------------------------------------- schemas

class Pat:
    """ECMAScript patterns as (text, sampler) pairs: generated text and a way to make matches."""
    ATOMS = [("a", lambda r: "a"), ("[0-9]", lambda r: r.choice("0123456789")), ("\\d", lambda r: r.choice("0123456789")),
             ("[a-z]", lambda r: r.choice("abcxyz")), ("\\w", lambda r: r.choice("aZ_9")), (".", lambda r: r.choice("a.é ")),
             ("\\s", lambda r: r.choice(" \t")), ("[^a]", lambda r: r.choice("bZ1 ")), ("\\.", lambda r: "."),
             ("[A-Fa-f0-9]", lambda r: r.choice("aF0")), ("-", lambda r: "-"), ("\\S", lambda r: r.choice("x1")),
             ("é", lambda r: "é"), ("[+\\-]", lambda r: r.choice("+-")), ("\\/", lambda r: "/")]

    @staticmethod
    def gen(r, depth=0):
        parts = []
        for _ in range(r.randint(1, 3)):
            k = r.random()
            if k < 0.15 and depth < 2:
                alts = [Pat.gen(r, depth + 1) for _ in range(r.randint(1, 3))]
                text = "(" + r.choice(["", "?:"]) + "|".join(a[0] for a in alts) + ")"
                f = (lambda alts: lambda r: r.choice(alts)[1](r))(alts)
            else:
                text, f = r.choice(Pat.ATOMS)
            q = r.random()
            if q < 0.5 or depth > 0:  # no nested quantifiers: Python's re backtracks exponentially on them
                parts.append((text, f))
                continue
            lo, hi, qt = [(0, 3, "*"), (1, 3, "+"), (0, 1, "?"), (2, 2, "{2}"), (1, 3, "{1,3}"), (2, 4, "{2,}")][r.randrange(6)]
            if r.random() < 0.1:
                qt += "?"  # lazy
            parts.append((text + qt, (lambda f, lo, hi: lambda r: "".join(f(r) for _ in range(r.randint(lo, hi))))(f, lo, hi)))
        text = "".join(p[0] for p in parts)
        return text, (lambda ps: lambda r: "".join(p[1](r) for p in ps))(parts)

    @staticmethod
    def top(r):
        t, f = Pat.gen(r)
        a, z = r.random() < 0.5, r.random() < 0.5
        if r.random() < 0.15:  # top-level alternation, each end anchoring its own branch: "^p([0-9]+)|t$"
            t2, f2 = Pat.gen(r)
            return "^" + t + "|" + t2 + "$", (lambda r: f(r) if r.random() < 0.5 else f2(r))
        return ("^" if a else "") + t + ("$" if z else ""), f


SAMPLERS = {}  # pattern text -> sampler


class Gen:
    """One random schema of one draft (or, with --cross-draft, keywords of any draft)."""
    def __init__(self, r, draft, cross):
        self.r, self.draft, self.cross, self.defs = r, draft, cross, {}

    def has(self, *drafts):
        return self.draft in drafts or (self.cross and self.r.random() < 0.1)

    def opt(self, s, p, key, make):  # s[key] = make() with probability p
        if self.r.random() < p:
            s[key] = make()

    def num(self, integral=True):
        v = self.r.choice([0, 1, 2, 3, 5, 10, -1, -5, 100, 255, 1000000])
        return v if integral or self.r.random() < 0.6 else v + self.r.choice([0.5, 0.25, -0.5, 0.1])

    def pattern(self):
        p, f = Pat.top(self.r)
        SAMPLERS[p] = f
        return p

    def schema(self, d=0):
        r, k = self.r, self.r.random()
        if d >= 4 or (d > 0 and r.random() < 0.2 * d) or k >= 0.74:
            return self.leaf(d)
        if k < 0.6:
            return [self.obj, self.arr, self.combinator][(k >= 0.3) + (k >= 0.45)](d)
        if k < 0.66 and self.has("7", "2020"):
            return {"if": self.schema(d + 1), "then": self.schema(d + 1), "else": self.schema(d + 1)}
        return self.ref(d)

    def leaf(self, d):
        r, k = self.r, self.r.random()
        if k < 0.45:
            return self.string() if k < 0.22 else self.number()
        if k < 0.6:
            vals = [r.choice(STRINGS[:12]), self.num(False), r.choice([True, False, None]), [1, "a"], {"a": 1}]
            s = {"enum": r.sample(vals, r.randint(1, 4))} if r.random() < 0.6 or not self.has("6", "7", "2020") \
                else {"const": r.choice(vals)}
            self.opt(s, 0.3, "type", lambda: r.choice(["string", "integer", "number", ["string", "null"]]))
            return s
        if k < 0.72:
            t = r.sample(["string", "integer", "number", "boolean", "null", "array", "object"], r.randint(1, 3))
            return {**self.string(), **self.number(), "type": t} if r.random() < 0.5 else {"type": t}
        if k < 0.8 and self.draft != "4":
            return r.choice([True, False])
        return r.choice([{}, {"type": "boolean"}, {"type": "null"}, {"type": "object"}, {"type": "array"}])

    def string(self):
        r, k = self.r, self.r.random()
        s = {"type": "string"} if r.random() < 0.85 else {}
        if k < 0.3:
            s["pattern"] = self.pattern()
        elif k < 0.55:
            s["format"] = r.choice(FORMATS[self.draft] if not self.cross else sum(FORMATS.values(), []))
        if k >= 0.3 and r.random() < 0.5 or k >= 0.55:  # lengths (refused with a pattern or a format)
            self.opt(s, 0.6, "minLength", lambda: r.choice([0, 1, 2, 3]))
            self.opt(s, 0.6, "maxLength", lambda: r.choice([0, 1, 2, 3, 5, 2001]))
        return s

    def number(self):
        r = self.r
        s = {"type": r.choice(["integer", "number", "integer"])}
        self.opt(s, 0.7, "minimum", lambda: self.num(r.random() < 0.7))
        self.opt(s, 0.6, "maximum", lambda: self.num(r.random() < 0.7))
        if self.draft == "4" and not self.cross:  # draft 4: booleans beside minimum / maximum
            for a, b in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
                self.opt(s, 0.4 * (a in s), b, lambda: r.random() < 0.7)
        else:
            self.opt(s, 0.4, r.choice(["exclusiveMinimum", "exclusiveMaximum"]), lambda: self.num(r.random() < 0.7))
        self.opt(s, 0.07, "multipleOf", lambda: r.choice([1, 2, 3, 7, 10, 0.5]))
        return s

    def obj(self, d):
        r = self.r
        s = {"type": "object"} if r.random() < 0.85 else {}
        props = {name: self.schema(d + 1) for name in r.sample(NAMES, r.randint(0, 4))}
        if props or r.random() < 0.5:
            s["properties"] = props
        names = list(props)
        if r.random() < 0.6 and names:
            s["required"] = r.sample(names, r.randint(1, len(names))) + ([r.choice(NAMES)] if r.random() < 0.15 else [])
        k = r.random()
        if k < 0.55:
            s["additionalProperties"] = False if k < 0.35 else self.schema(d + 1) if k < 0.5 else True
        k = r.random()
        if k < 0.06:
            p = r.choice(KEY_PATTERNS)
            SAMPLERS[p] = lambda r: r.choice(NAMES)
            s["patternProperties"] = {p: self.schema(d + 1)}
        elif k < 0.21:
            sub = self.schema(d + 1)
            s["patternProperties"] = {self.pattern(): sub}
            if r.random() < 0.3:  # a second pattern, of the same schema or another
                s["patternProperties"][self.pattern()] = sub if r.random() < 0.7 else self.schema(d + 1)
            self.opt(s, 0.7, "additionalProperties", lambda: False)
        if self.has("6", "7", "2020"):
            self.opt(s, 0.08, "propertyNames", lambda: r.choice([{"type": "string"}, {"maxLength": 2}, {"pattern": "^[a-z]+$"},
                                                                  {"enum": ["a", "id", "zz"]}, {"minLength": 2, "pattern": "a"},
                                                                  False, {"type": "integer"}]))
        self.opt(s, 0.12, "minProperties", lambda: r.randint(0, 3))
        self.opt(s, 0.12, "maxProperties", lambda: r.randint(0, 3))
        if r.random() < 0.12 and names:
            a, b = r.choice(names), r.choice(NAMES)
            if self.has("4", "6", "7"):
                s["dependencies"] = {a: [b] if r.random() < 0.5 else self.obj(d + 1)}
            else:
                s.update({"dependentRequired": {a: [b]}} if r.random() < 0.5 else {"dependentSchemas": {a: self.obj(d + 1)}})
        return s

    def arr(self, d):
        r, k = self.r, self.r.random()
        s = {"type": "array"} if r.random() < 0.85 else {}
        if k < 0.5:
            s["items"] = self.schema(d + 1)
        elif k < 0.8:  # a tuple: prefixItems + items (2020-12), items + additionalItems (earlier)
            tup = [self.schema(d + 1) for _ in range(r.randint(1, 3))]
            rest = r.choice([None, False, self.schema(d + 1)]) if self.draft != "4" else r.choice([None, False, {}])
            first, then = ("prefixItems", "items") if self.draft == "2020" else ("items", "additionalItems")
            s.update({first: tup, **({then: rest} if rest is not None else {})})
        self.opt(s, 0.4, "minItems", lambda: r.randint(0, 3))
        self.opt(s, 0.4, "maxItems", lambda: r.choice([0, 1, 2, 3, 4]))
        self.opt(s, 0.1, "uniqueItems", lambda: r.random() < 0.7)
        if self.has("6", "7", "2020"):
            self.opt(s, 0.05, "contains", lambda: self.leaf(d + 1))
        return s

    def combinator(self, d):
        r = self.r
        if r.random() < 0.15:
            return {"not": r.choice([{}, {"required": r.sample(NAMES[:4], r.randint(1, 2))}, self.leaf(d + 1)])}
        key = r.choice(["anyOf", "oneOf", "allOf"])
        if key == "oneOf" and r.random() < 0.3:  # exactly one of some required lists
            return {"type": "object", "properties": {n: self.schema(d + 1) for n in r.sample(NAMES, 2)},
                    "oneOf": [{"required": [n]} for n in r.sample(NAMES[:5], r.randint(2, 3))]}
        s = {key: [self.schema(d + 1) for _ in range(r.randint(1, 3))]}
        if r.random() < 0.3:  # sibling keywords merge into each alternative
            s.update(r.choice([{"type": "object"}, {"type": "string"}, {"minimum": 0}, {"required": ["a"]}]))
        return s

    def ref(self, d):
        r = self.r
        box = "definitions" if self.draft != "2020" else "$defs"
        if r.random() < 0.1 and d > 0:
            return {"$ref": "#"}
        name = r.choice(["A", "B", "node"])
        if name not in self.defs:
            self.defs[name] = None  # placeholder: a definition may refer to itself
            self.defs[name] = {"type": "object", "required": ["v"], "properties": {"v": self.leaf(d + 1), "kids": {
                "type": "array", "items": {"$ref": "#/%s/node" % box}, "maxItems": 2}}} if name == "node" else self.schema(d + 1)
        s = {"$ref": "#/%s/%s" % (box, name)}
        if r.random() < 0.2:  # siblings: ignored in drafts 4-7, applied in 2020-12
            s.update(r.choice([{"type": "object"}, {"minLength": 1}, {"maximum": 3}]))
        return s

    def root(self):
        s = self.schema(0)
        s = dict(s) if isinstance(s, dict) else {"allOf": [s]}
        if self.defs:
            s["definitions" if self.draft != "2020" else "$defs"] = dict(self.defs)
        s["$schema"] = DRAFTS[self.draft]
        return s

# ----------------------------------------------------------------------------------- instances

def resolve(root, ref):
    if not ref.startswith("#"):
        return {}
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def rand_value(r, d=0):
    k = r.randrange(8 if d < 2 else 5)
    if k == 5:
        return [rand_value(r, d + 1) for _ in range(r.randint(0, 3))]
    if k == 6:
        return {r.choice(NAMES): rand_value(r, d + 1) for _ in range(r.randint(0, 3))}
    return [None, r.choice([True, False]), r.choice([0, 1, -1, 7, 3.5, 2.0, -0.25, 1e20, 1e-7, 255]),
            r.choice(STRINGS), r.randint(-3, 300), 0, 0, r.choice(STRINGS) * 2][k]


def fmt_value(r, f):
    return r.choice({
        "date": ["2024-02-29", "2023-02-29", "2024-13-01", "0000-01-01", "2024-1-01", "20240101", "1999-12-31"],
        "time": ["12:30:00Z", "23:59:59.5+01:00", "24:00:00Z", "12:30:00", "12:30:00z", "12:60:00Z"],
        "date-time": ["2024-01-31T23:59:59.5+01:00", "2024-01-31t00:00:00z", "2024-02-30T00:00:00Z", "2024-01-31 00:00:00Z"],
        "uuid": ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}"],
        "email": ["a@b.co", "a@b", "@", "x.y+z@ex-ample.org", "no at"],
        "idn-email": ["a@b.co", "é@b.co"],
        "ipv4": ["1.2.3.4", "256.1.1.1", "01.2.3.4", "0.0.0.0", "1.2.3"],
        "uri": ["http://x.org/a?b#c", "urn:isbn:1", "/rel", "http://[::1]/", "http://x/%zz", "a:", "http://exa mple.com"],
        "uri-reference": ["../a/b?c#d", "", "#f", "//h/p", "a:b", "%41", "a b"],
    }.get(f, STRINGS))


def gen_valid(r, s, root, d=0):
    """A value meant to satisfy s (best effort; the reference has the last word)."""
    if d > 6 or s is True or s == {}:
        return rand_value(r, 2)
    if s is False or not isinstance(s, dict):
        return None
    if "$ref" in s:
        return gen_valid(r, resolve(root, s["$ref"]), root, d + 1)
    if "const" in s:
        return copy.deepcopy(s["const"])
    if "enum" in s and s["enum"]:
        return copy.deepcopy(r.choice(s["enum"]))
    for key in ("anyOf", "oneOf"):
        if s.get(key):
            rest, alt = {k: v for k, v in s.items() if k != key}, r.choice(s[key])
            return gen_valid(r, {**alt, **rest} if isinstance(alt, dict) else rest, root, d + 1)
    if s.get("allOf"):
        merged = {k: v for k, v in s.items() if k != "allOf"}
        for sub in s["allOf"]:
            if isinstance(sub, dict):
                merged.update(sub)
        return gen_valid(r, merged, root, d + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = r.choice(t) if t else None
    if t is None:
        t = ("object" if "properties" in s or "required" in s else "array" if "items" in s or "prefixItems" in s
             else "string" if "pattern" in s or "format" in s or "minLength" in s
             else "number" if "minimum" in s or "maximum" in s else r.choice(["string", "integer", "null", "boolean"]))
    if t == "object":
        out = {}
        for n, sub in (s.get("properties") or {}).items():
            if n in s.get("required", []) or r.random() < 0.6:
                out[n] = gen_valid(r, sub, root, d + 1)
        for n in s.get("required", []):
            out.setdefault(n, gen_valid(r, s.get("additionalProperties", True), root, d + 1))
        for p, sub in (s.get("patternProperties") or {}).items():
            if r.random() < 0.6 and p in SAMPLERS:
                out[SAMPLERS[p](r)] = gen_valid(r, sub, root, d + 1)
        if s.get("additionalProperties", True) is not False and r.random() < 0.3:
            out[r.choice(NAMES) + "z"] = gen_valid(r, s.get("additionalProperties", True), root, d + 1)
        return out
    if t == "array":
        tup = s.get("prefixItems") or (s.get("items") if isinstance(s.get("items"), list) else [])
        rest = s.get("items", True) if "prefixItems" in s else s.get("additionalItems", True) if tup else s.get("items", True)
        n = r.randint(s.get("minItems", 0), max(s.get("minItems", 0), s.get("maxItems", 3)))
        return [gen_valid(r, tup[i] if i < len(tup) else rest, root, d + 1) for i in range(n)]
    if t == "string":
        if s.get("pattern") in SAMPLERS:
            return SAMPLERS[s["pattern"]](r)
        if "format" in s:
            return fmt_value(r, s["format"])
        lo = s.get("minLength", 0)
        n = r.randint(lo, max(lo, min(s.get("maxLength", lo + 4), lo + 6)))
        return "".join(r.choice("aé日🚀 \"\\\n0") for _ in range(n))
    if t in ("integer", "number"):
        bounds = [s[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if isinstance(s.get(k), (int, float)) and not isinstance(s.get(k), bool)]
        v = r.choice(bounds) + r.choice([0, 0, 1, -1]) if bounds else r.choice([0, 1, -7, 42])
        return int(v) if t == "integer" else r.choice([v, v + 0.5, float(v)])
    return {"boolean": r.random() < 0.5, "null": None}.get(t)


def paths(x, at=()):  # the path of every node in x, the root first
    yield at
    if isinstance(x, dict):
        for k, v in x.items():
            yield from paths(v, at + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from paths(v, at + (i,))


def get_at(x, p):
    for k in p:
        x = x[k]
    return x


def set_at(x, p, v):
    if not p:
        return v
    x = copy.deepcopy(x)
    get_at(x, p[:-1])[p[-1]] = v
    return x


def mutate(r, x):
    p = r.choice(list(paths(x)))
    v = get_at(x, p)
    if isinstance(v, dict) and r.random() < 0.7:
        v = dict(v)
        k = r.random()
        if v and k < 0.35:
            del v[r.choice(list(v))]
        elif v and k < 0.6:
            old = r.choice(list(v))
            v[r.choice([old + "x", old[:-1], old.upper(), old + " ", "_" + old])] = v.pop(old)
        else:
            v[r.choice(NAMES + [n + "1" for n in NAMES])] = rand_value(r, 2)
    elif isinstance(v, list) and r.random() < 0.7:
        v = list(v)
        if v and r.random() < 0.4:
            v.pop(r.randrange(len(v)))
        else:
            v.append(copy.deepcopy(r.choice(v)) if v and r.random() < 0.5 else rand_value(r, 2))
    elif isinstance(v, str) and r.random() < 0.7:
        v = r.choice([v + r.choice("a0 é-"), v[:-1], v[1:], v.upper(), "x" + v, v + "\n", v * 2 if len(v) < 8 else v])
    elif isinstance(v, (int, float)) and not isinstance(v, bool) and r.random() < 0.7:
        v = r.choice([v + 1, v - 1, v + 0.5, v - 0.5, -v, float(v), v * 1000, v + 1e-9])
    else:
        v = rand_value(r, 1)
    return set_at(x, p, v)


def instances(r, schema, n):
    out, seen = [], set()
    for i in range(n * 3):
        if len(out) >= n:
            break
        base = gen_valid(r, schema, schema)
        x = base if i % 3 == 0 else mutate(r, base) if i % 3 == 1 else rand_value(r)
        if r.random() < 0.3:
            x = mutate(r, x)
        key = json.dumps(x, sort_keys=True, default=str)
        if key not in seen and serialisable(x):
            seen.add(key)
            out.append(x)
    return out

# ---------------------------------------------------------------------------------- the checker

class Checker(CaseRunner):
    """rows: [(schema, [instances])] through `radixlm grammar --check-cases`."""

    def __init__(self, binary, case_timeout, workdir):
        super().__init__(binary, ["grammar", "--check-cases"], case_timeout, 2.0, workdir)

    def run(self, rows):
        return self.run_lines([{"schema": s, "instances": xs} for s, xs in rows])


def classify(v, acc):
    if v is None:
        return None
    valid, narrowed_valid = v
    if not valid and any(acc):
        return "invalid_accepted"
    if valid and not all(acc):
        return "valid_rejected" if narrowed_valid else "narrowing"
    return "agree"


KNOWN = set(jsonschema.Draft202012Validator.VALIDATORS) | set(jsonschema.Draft4Validator.VALIDATORS) | {
    "dependentRequired", "dependentSchemas", "dependencies", "additionalItems", "$ref", "minProperties"}


def refusal_keyword(msg):
    """The keyword a refusal names (coverage counts), or what kind of refusal it is."""
    if re.search(r"no value|satisf|not allowed by|schema false|below|above 'maximum'|matches no text", msg):
        return "(unsatisfiable)"
    for k in re.findall(r"'([$A-Za-z]+)'", msg):
        if k in KNOWN:
            return k
    if "grammar" in msg:
        return "(grammar limit)"
    return "(other) " + re.sub(r"[0-9]+", "N", re.sub(r"^[^:]*: ", "", msg))[:50]


SUBSCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies")
LEAF_KEYS = ("enum", "const", "required", "type", "default", "examples", "dependentRequired", "$schema")


def keywords(s, out=None):
    out = set() if out is None else out
    if isinstance(s, dict):
        for k, v in s.items():
            out.add("format:" + v if k == "format" and isinstance(v, str) else k)
            if k in SUBSCHEMA_MAPS and isinstance(v, dict):
                for sub in v.values():
                    keywords(sub, out)
            elif k not in LEAF_KEYS:
                keywords(v, out)
    elif isinstance(s, list):
        for x in s:
            keywords(x, out)
    return out


def signature(cls, schema):
    return cls + ":" + ",".join(sorted(keywords(schema) - {"$schema"}))

# --------------------------------------------------------------------------------- minimisation

def without(x, p):  # x with the member / element at path p removed
    parent = copy.deepcopy(get_at(x, p[:-1]))
    if isinstance(parent, dict):
        del parent[p[-1]]
    else:
        parent.pop(p[-1])
    return set_at(x, p[:-1], parent)


def smaller_values(v):
    if isinstance(v, bool) or v is None:
        return [None] if v is not None else []
    if isinstance(v, (int, float)):
        return [c for c in (0, 1, int(v), v // 2) if c != v and not (isinstance(c, float) and c != c)]
    if isinstance(v, str):
        return [c for c in ("", v[:len(v) // 2], v[1:], v[:-1]) if c != v]
    if isinstance(v, dict):
        return list(v.values()) + ([{}] if v else [])
    return list(v) + ([[]] if v else [])


def reductions(x, root_keep=()):
    """Smaller variants of x: members/elements removed, nodes replaced by children or simpler values."""
    seen = {json.dumps(x, sort_keys=True)}

    def fix(y):  # a child replacing the root keeps $schema and the definitions
        if isinstance(x, dict) and isinstance(y, dict):
            y = dict(y, **{k: x[k] for k in root_keep if k in x and k not in y})
        return y
    for p in paths(x):
        if p == ("$schema",):
            continue
        cands = []
        if p:
            cands.append(without(x, p))
        v = get_at(x, p)
        cands += [fix(set_at(x, p, c)) if not p else set_at(x, p, c) for c in smaller_values(v)]
        if p and isinstance(v, (dict, list)):
            cands += [set_at(x, p, c) for c in (True, {})]
        for c in cands:
            key = json.dumps(c, sort_keys=True)
            if key not in seen:
                seen.add(key)
                yield c


def minimise(checker, cls, schema, inst, deadline):
    """Greedy delta debugging: the smallest one-step reduction (of the schema or the instance) that
    keeps the class, until none does."""
    size = lambda c: len(json.dumps(c, ensure_ascii=False))
    while time.time() < deadline:
        cands = [(s, inst) for s in reductions(schema, ("$schema", "definitions", "$defs")) if schema_ok(s)]
        cands += [(schema, x) for x in reductions(inst) if serialisable(x)]
        cands.sort(key=lambda c: size(c[0]) + size(c[1]))  # the biggest reductions first
        hit = None
        for i in range(0, len(cands), 100):
            chunk = cands[i:i + 100]
            if cls in ("crash", "hang"):
                res, status, _ = checker.run([(s, [x]) for s, x in chunk])
                hit = chunk[len(res)] if status == cls and len(res) < len(chunk) else None
            else:
                res, status, _ = checker.run([(s, [x]) for s, x in chunk])
                for (s, x), r in zip(chunk, res if not status else []):
                    if r.get("compiled") and classify(verdicts(s, [x])[0], r["accept"][0]) == cls:
                        hit = (s, x)
                        break
            if hit or time.time() > deadline:
                break
        if not hit:
            break
        schema, inst = hit
    return schema, inst

# ------------------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("radixlm")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/fuzz-findings/schema")
    ap.add_argument("--batch", type=int, default=40)
    ap.add_argument("--max-findings", type=int, default=50)
    ap.add_argument("--per-schema", type=int, default=10, help="instances per schema")
    ap.add_argument("--case-timeout", type=float, default=30)
    ap.add_argument("--minimise-seconds", type=float, default=60)
    ap.add_argument("--cross-draft", action="store_true")
    a = ap.parse_args()
    start = time.time()
    deadline = start + a.seconds
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    seen_sigs = set()
    for name in sorted(os.listdir(a.out)):  # earlier runs' findings: not saved again
        if name.startswith("finding-") and name.endswith(".json"):
            with open(os.path.join(a.out, name), encoding="utf-8") as f:
                old = json.load(f)
            seen_sigs.add(old.get("signature") or signature(old["class"], old["schema"]))
    next_id = len([n for n in os.listdir(a.out) if n.startswith("finding-")]) + 1
    stats = {"schemas": 0, "compiled": 0, "instances": 0, "undecided": 0, "narrowing": 0, "max_compile_ms": 0.0}
    disagreements, refusals, saved, minimised_pre = {}, {}, [], set()
    work = tempfile.mkdtemp(prefix="schema_diff_")
    atexit.register(shutil.rmtree, work, True)  # its copy of the binary too
    checker = Checker(a.radixlm, a.case_timeout, work)

    def save(cls, schema, inst, verdict, accept, detail=None):
        nonlocal next_id
        sig = signature(cls, schema)
        if sig in seen_sigs:
            return
        seen_sigs.add(sig)
        rec = {"class": cls, "schema": schema, "instance": inst, "verdict": verdict, "accept": accept,
               "seed": a.seed, "signature": sig}
        if detail:
            rec["detail"] = detail
        path = os.path.join(a.out, "finding-%03d.json" % next_id)
        next_id += 1
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, indent=1)
        saved.append(path)
        print("finding %s: %s" % (path, sig), flush=True)

    def examine(rows, results):
        todo = []
        for (s, xs, vs), res in zip(rows, results):
            stats["schemas"] += 1
            stats["max_compile_ms"] = max(stats["max_compile_ms"], res.get("compile_ms", 0))
            if not res.get("compiled"):
                k = refusal_keyword(res.get("error", ""))
                refusals[k] = refusals.get(k, 0) + 1
                continue
            stats["compiled"] += 1
            for x, v, acc in zip(xs, vs, res["accept"]):
                stats["instances"] += 1
                c = classify(v, acc)
                if c is None:
                    stats["undecided"] += 1
                elif c == "narrowing":
                    stats["narrowing"] += 1
                elif c != "agree":
                    disagreements[c] = disagreements.get(c, 0) + 1
                    pre = signature(c, s)
                    if pre not in minimised_pre and len(todo) < 4:
                        minimised_pre.add(pre)
                        todo.append((c, s, x))
        for c, s, x in todo:
            if len(saved) >= a.max_findings:
                return
            ms, mx = minimise(checker, c, s, x, min(time.time(), deadline) + a.minimise_seconds)
            res, status, _ = checker.run([(ms, [mx])])
            v = verdicts(ms, [mx])[0]
            save(c, ms, mx, {"valid": v[0], "narrowed_valid": v[1]} if v else None,
                 res[0]["accept"][0] if res and res[0].get("compiled") else None)

    def run_rows(rows):
        while rows:
            results, status, detail = checker.run([(s, xs) for s, xs, _ in rows])
            examine(rows[:len(results)], results)
            if not status:
                return
            bad = rows[len(results)]
            rest = rows[len(results) + 1:]
            _, alone, detail1 = checker.run([(bad[0], bad[1])])
            disagreements[status] = disagreements.get(status, 0) + 1
            if alone == status:
                ms, mx = minimise(checker, status, bad[0], bad[1], min(time.time(), deadline) + a.minimise_seconds)
                save(status, ms, mx, None, None, detail1)
            else:
                save(status, bad[0], bad[1], None, None, "not reproduced alone (batch of %d): %s" % (len(rows), detail))
            rows = rest

    while time.time() < deadline and len(saved) < a.max_findings:
        SAMPLERS.clear()
        rows = []
        for _ in range(a.batch):
            draft = rng.choice(list(DRAFTS))
            for _ in range(10):
                s = Gen(rng, draft, a.cross_draft).root()
                if schema_ok(s):
                    break
            else:
                continue
            xs = instances(rng, s, a.per_schema)
            rows.append((s, xs, verdicts(s, xs)))
        run_rows(rows)
    summary = {"seconds": round(time.time() - start, 1), "seed": a.seed, "schemas": stats["schemas"],
               "compiled": stats["compiled"], "instances": stats["instances"], "undecided": stats["undecided"],
               "narrowing": stats["narrowing"], "disagreements": disagreements, "findings_saved": len(saved),
               "findings": saved, "refusals": dict(sorted(refusals.items(), key=lambda kv: -kv[1])),
               "checker_runs": checker.calls, "max_compile_ms": stats["max_compile_ms"]}
    print(json.dumps(summary, ensure_ascii=False))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())

//! Requirements: the small expression language of predicates, such as
//! `battery >= 50 && has(gps) && free_disk >= 1GB`, parsed with clear errors and evaluated
//! against a server's [`Facts`].
//!
//! A server checks two requirements before it runs a call: its own acceptance predicate
//! (server-wide, or per procedure, from its configuration) and then the call's requirements,
//! which the caller wrote (`ferry call any photo --require 'battery >= 50 && has(gps)'`). Both
//! are a [`Requirement`], parsed once with [`Requirement::parse`] and checked against what the
//! server knows now with [`Requirement::check`], which says which clause failed and why.
//!
//! # The language
//!
//! A requirement is a condition on the server's *facts*. The facts are a closed set (listed in
//! [`FACTS`], described in [`FACT_INFO`]), so a typo is caught where the expression is typed,
//! not silently treated as false on every server:
//!
//! | fact          | kind   | meaning                                                      |
//! |---------------|--------|--------------------------------------------------------------|
//! | `battery`     | number | battery charge, percent (0 to 100); units: `%`               |
//! | `free_disk`   | number | free space for the node's store, bytes; units: `B`, `KB`, `GiB`, … |
//! | `free_memory` | number | free memory, bytes; units: `B`, `KB`, `GiB`, …               |
//! | `load`        | number | 1-minute load average                                        |
//! | `cpus`        | number | number of CPUs                                               |
//! | `running`     | number | procedure executions running now on this server             |
//! | `hour`        | number | hour of the day, 0 to 23, server local time                  |
//! | `minute`      | number | minute of the hour, 0 to 59, server local time               |
//! | `weekday`     | number | day of the week, 1 (Monday) to 7 (Sunday), server local time |
//! | `uptime`      | number | time since the node started, seconds; units: `s`, `min`, `h`, `d` |
//! | `moving`      | yes/no | the device is moving                                         |
//! | `charging`    | yes/no | the device is on external power                              |
//!
//! `has(tag)` tests a hardware or capability tag the server declares (`has(gps)`,
//! `has(camera)`). A number fact is compared with a number (`battery >= 50`, or the other way
//! round, `50 <= battery`); a yes/no fact is a condition on its own (`moving`, `!moving`).
//! Conditions combine with `!` (not), `&&` (and), `||` (or) and parentheses. `!` binds tightest,
//! then comparisons, then `&&`, then `||`; `&&` and `||` group left to right.
//!
//! ## Grammar
//!
//! In EBNF (ISO 14977: `,` sequence, `|` choice, `{ x }` zero or more times, `[ x ]` optional,
//! `(* … *)` a comment). Whitespace (any Unicode white space, new lines included) may appear
//! between any two tokens, and between a number and its unit; it is needed nowhere.
//!
//! ```text
//! requirement = [ or ] ;                 (* empty or blank: always true *)
//! or          = and , { "||" , and } ;
//! and         = unary , { "&&" , unary } ;
//! unary       = comparison
//!             | { "!" } , atom ;         (* "!battery >= 50" is an error: write "!(battery >= 50)" *)
//! atom        = "(" , or , ")"
//!             | "true" | "false"
//!             | "has" , "(" , tag , ")"
//!             | flag_fact ;
//! comparison  = number_fact , comparator , quantity
//!             | quantity , comparator , number_fact ;   (* comparisons do not chain *)
//! comparator  = "==" | "!=" | "<" | "<=" | ">" | ">=" ;
//! quantity    = number , [ unit ] ;
//! number      = digit , { digit } , [ "." , digit , { digit } ] ;
//! unit        = "%"                                    (* percent: battery *)
//!             | "B" | "KB" | "MB" | "GB" | "TB"        (* bytes, powers of 1000 *)
//!             | "KiB" | "MiB" | "GiB" | "TiB"          (* bytes, powers of 1024 *)
//!             | "s" | "min" | "h" | "d" ;              (* seconds: 1, 60, 3600, 86400 *)
//! tag         = tag_char , { tag_char } ;
//! tag_char    = letter | digit | "_" | "-" ;
//! number_fact = "battery" | "free_disk" | "free_memory" | "load" | "cpus" | "running"
//!             | "hour" | "minute" | "weekday" | "uptime" ;
//! flag_fact   = "moving" | "charging" ;
//! digit       = "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" ;
//! letter      = "A" | … | "Z" | "a" | … | "z" ;
//! ```
//!
//! Further rules:
//!
//! - Fact names and the words `true`, `false` and `has` are lower case. Units are not case
//!   sensitive (`1gb`, `1GB` and `1Gb` are the same). Tags are not case sensitive either: they
//!   are compared in lower case (`has(GPS)` is `has(gps)`).
//! - A unit must fit its fact: `%` only `battery`, the byte units only `free_disk` and
//!   `free_memory`, the time units only `uptime`; a number without a unit fits every fact
//!   (`free_disk >= 1000000000` means `free_disk >= 1GB`). A unit may follow its number
//!   directly (`1GB`, the canonical form) or after spaces (`1 GB`). A quantity's value is its
//!   number times the unit's scale, computed in decimal and rounded once, so `1.1GB` is exactly
//!   1100000000 bytes.
//! - Numbers are not negative (no fact is) and have no exponent.
//! - A source is at most [`MAX_SOURCE_LEN`] (1024) bytes, and `(` and `!` nest at most
//!   [`MAX_DEPTH`] (32) deep.
//! - Errors ([`ParseError`]) give a byte offset; their "column" is that offset plus one.
//!
//! ## Canonical form
//!
//! A [`Requirement`] displays in a canonical form that parses back to an equal requirement:
//! one space around each operator, units written right after their number in their canonical
//! spelling (`GB`, `KiB`, `min`), numbers in their shortest decimal form (`1.50` becomes `1.5`),
//! tags in lower case, and only the parentheses the structure needs (`((a))` becomes `a`, but
//! the parentheses in `(a && b) && c` and `!(battery >= 50)` stay, so the tree is kept as
//! written). The canonical form can be longer than the source (it adds spaces), so a canonical
//! form longer than [`MAX_SOURCE_LEN`] does not parse again; [`Requirement::source`] keeps the
//! text as it was written.
//!
//! # Evaluation
//!
//! [`Requirement::check`] evaluates left to right and stops as soon as the outcome is known
//! (`&&` at its first clause that is not true, `||` at its first true branch), so the same
//! requirement and facts always give the same verdict and the same explanation. A fact the
//! server does not know (a server without a battery, say) makes every clause that needs it
//! *unknown*: `!` of unknown is unknown, and a requirement passes only when it is true, so an
//! unknown fact never lets a call through by accident (`!(battery < 20)` fails on a server
//! without a battery; `battery >= 50 || charging` passes there when charging). Tags are either
//! declared or absent, never unknown.
//!
//! When a requirement fails, [`Verdict::Fail`] names the clause that decided it, in canonical
//! form, followed by the facts that made it fail:
//!
//! - for `&&`, its first clause that is not true: `battery >= 50 (battery is 31)`,
//!   `has(gps) (no such hardware)`, `free_disk >= 1GB (free_disk is 512 MB)`,
//!   `battery >= 50 (battery is unknown here)`;
//! - for `||`, the whole disjunction, with what each branch found:
//!   `battery >= 50 || charging (battery is 31, not charging)`;
//! - for `!`, the whole negation, with the facts that made its operand true:
//!   `!moving (moving)`, `!(hour >= 9 && hour < 17) (hour is 10)`.
//!
//! Sizes are shown in the clause's unit family (decimal for `GB`, binary for `GiB`), durations
//! in the largest fitting unit, rounded; a value whose rounding would make the clause look
//! satisfied is shown exactly instead (`free_disk is 999999999 B`, not `1000 MB`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// The longest source text a requirement may have, in bytes.
pub const MAX_SOURCE_LEN: usize = 1024;

/// How deeply `(` and `!` may nest (each `(` and each `!` is one level).
pub const MAX_DEPTH: usize = 32;

/// Whether a fact is a number or a yes/no flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FactKind {
    /// A number, compared with a number: `battery >= 50`.
    Number,
    /// A yes/no flag, a condition on its own: `moving`, `!moving`.
    Flag,
}

impl FactKind {
    /// `number` or `yes/no`, for help texts.
    pub fn name(self) -> &'static str {
        match self {
            FactKind::Number => "number",
            FactKind::Flag => "yes/no",
        }
    }
}

/// What a number fact measures, which decides the units it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Measure {
    /// A percentage: no unit or `%`.
    Percent,
    /// A size in bytes: no unit, `B`, `KB`, `MB`, `GB`, `TB`, `KiB`, `MiB`, `GiB` or `TiB`.
    Bytes,
    /// A duration in seconds: no unit, `s`, `min`, `h` or `d`.
    Seconds,
    /// A plain number: no unit.
    Plain,
}

impl Measure {
    fn describe(self) -> &'static str {
        match self {
            Measure::Percent => "a percentage",
            Measure::Bytes => "a size in bytes",
            Measure::Seconds => "a duration in seconds",
            Measure::Plain => "a plain number",
        }
    }
}

/// One fact a requirement can name, for documentation and help texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactInfo {
    /// The name written in requirements (`battery`).
    pub name: &'static str,
    /// Number or yes/no.
    pub kind: FactKind,
    /// What a number fact measures (`None` for a yes/no fact).
    pub measure: Option<Measure>,
    /// One line saying what it is.
    pub description: &'static str,
    /// A condition using it, for help texts and error messages.
    pub example: &'static str,
}

const fn number(
    name: &'static str,
    measure: Measure,
    description: &'static str,
    example: &'static str,
) -> FactInfo {
    FactInfo {
        name,
        kind: FactKind::Number,
        measure: Some(measure),
        description,
        example,
    }
}

const fn flag(name: &'static str, description: &'static str, example: &'static str) -> FactInfo {
    FactInfo {
        name,
        kind: FactKind::Flag,
        measure: None,
        description,
        example,
    }
}

const FACT_COUNT: usize = 12;

const FACT_TABLE: [FactInfo; FACT_COUNT] = [
    number(
        "battery",
        Measure::Percent,
        "battery charge in percent, 0 to 100 (unknown on a device without a battery)",
        "battery >= 50",
    ),
    number(
        "free_disk",
        Measure::Bytes,
        "free space for the node's store, in bytes (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
        "free_disk >= 1GB",
    ),
    number(
        "free_memory",
        Measure::Bytes,
        "free memory, in bytes (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
        "free_memory >= 512MB",
    ),
    number("load", Measure::Plain, "1-minute load average", "load < 2"),
    number("cpus", Measure::Plain, "number of CPUs", "cpus >= 4"),
    number(
        "running",
        Measure::Plain,
        "procedure executions running now on this server",
        "running < 3",
    ),
    number(
        "hour",
        Measure::Plain,
        "hour of the day, 0 to 23, server local time",
        "hour >= 9",
    ),
    number(
        "minute",
        Measure::Plain,
        "minute of the hour, 0 to 59, server local time",
        "minute < 30",
    ),
    number(
        "weekday",
        Measure::Plain,
        "day of the week, 1 (Monday) to 7 (Sunday), server local time",
        "weekday <= 5",
    ),
    number(
        "uptime",
        Measure::Seconds,
        "time since the node started, in seconds (units s, min, h, d)",
        "uptime >= 10min",
    ),
    flag("moving", "the device is moving", "!moving"),
    flag("charging", "the device is on external power", "charging"),
];

/// Every fact a requirement can name, with what it is, in a fixed order.
pub const FACT_INFO: &[FactInfo] = &FACT_TABLE;

const fn fact_pairs() -> [(&'static str, FactKind); FACT_COUNT] {
    let mut out = [("", FactKind::Flag); FACT_COUNT];
    let mut i = 0;
    while i < FACT_COUNT {
        out[i] = (FACT_TABLE[i].name, FACT_TABLE[i].kind);
        i += 1;
    }
    out
}

const FACT_PAIRS: [(&str, FactKind); FACT_COUNT] = fact_pairs();

/// Every fact a requirement can name, with its kind, in the order of [`FACT_INFO`] (which also
/// has a one-line description of each).
pub const FACTS: &[(&str, FactKind)] = &FACT_PAIRS;

/// What is known about a fact by its name, if it is one.
pub fn fact_info(name: &str) -> Option<&'static FactInfo> {
    FACT_TABLE.iter().find(|f| f.name == name)
}

/// A fact named in a parsed requirement: an index into [`FACT_TABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FactId(usize);

impl FactId {
    fn lookup(name: &str) -> Option<FactId> {
        FACT_TABLE.iter().position(|f| f.name == name).map(FactId)
    }

    fn info(self) -> &'static FactInfo {
        &FACT_TABLE[self.0]
    }

    fn name(self) -> &'static str {
        self.info().name
    }
}

/// What a server knows about itself now, as the facts requirements are checked against.
///
/// Facts that are never set are unknown (see the module documentation for what that means).
/// Names are those of [`FACTS`]; values set under other names are kept but no requirement can
/// name them. Tags are kept in lower case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    numbers: BTreeMap<String, f64>,
    flags: BTreeMap<String, bool>,
    tags: BTreeSet<String>,
}

impl Facts {
    /// No facts known, no tags.
    pub fn new() -> Facts {
        Facts::default()
    }

    /// Sets a number fact (`battery`, `free_disk` in bytes, `uptime` in seconds, …). A value
    /// that is not finite (NaN, infinity) makes the fact unknown.
    pub fn set(&mut self, fact: &str, value: f64) -> &mut Facts {
        if value.is_finite() {
            match self.numbers.get_mut(fact) {
                Some(known) => *known = value,
                None => {
                    self.numbers.insert(fact.to_string(), value);
                }
            }
        } else {
            self.numbers.remove(fact);
        }
        self
    }

    /// Sets a yes/no fact (`moving`, `charging`).
    pub fn set_flag(&mut self, fact: &str, value: bool) -> &mut Facts {
        self.flags.insert(fact.to_string(), value);
        self
    }

    /// Makes a number or yes/no fact unknown again.
    pub fn unset(&mut self, fact: &str) -> &mut Facts {
        self.numbers.remove(fact);
        self.flags.remove(fact);
        self
    }

    /// Declares a hardware or capability tag (`gps`, `camera`), kept in lower case.
    pub fn add_tag(&mut self, tag: &str) -> &mut Facts {
        self.tags.insert(tag.to_ascii_lowercase());
        self
    }

    /// Withdraws a tag.
    pub fn remove_tag(&mut self, tag: &str) -> &mut Facts {
        self.tags.remove(&tag.to_ascii_lowercase());
        self
    }

    /// A number fact's value, if known.
    pub fn get(&self, fact: &str) -> Option<f64> {
        self.numbers.get(fact).copied()
    }

    /// A yes/no fact's value, if known.
    pub fn flag(&self, fact: &str) -> Option<bool> {
        self.flags.get(fact).copied()
    }

    /// Whether the tag is declared (not case sensitive).
    pub fn has_tag(&self, tag: &str) -> bool {
        if tag.bytes().any(|b| b.is_ascii_uppercase()) {
            self.tags.contains(&tag.to_ascii_lowercase())
        } else {
            self.tags.contains(tag)
        }
    }

    /// The declared tags, in lower case and sorted.
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().map(String::as_str)
    }
}

/// The outcome of checking a requirement against a server's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The requirement holds.
    Pass,
    /// It does not: the clause that decided it, in canonical form, and the facts that made it
    /// fail, such as `battery >= 50 (battery is 31)`.
    Fail(String),
}

impl Verdict {
    /// Whether the requirement holds.
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => f.write_str("pass"),
            Verdict::Fail(why) => write!(f, "fails: {why}"),
        }
    }
}

/// Why a source is not a requirement, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the source of the problem (at most the source's length; the end of the
    /// source when something is missing there).
    pub offset: usize,
    /// What is wrong, and where possible how to write it instead.
    pub message: String,
}

impl ParseError {
    fn new(offset: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            offset,
            message: message.into(),
        }
    }

    /// The source line the error is on, and under it a caret at the error and the message:
    ///
    /// ```text
    /// batery >= 50
    /// ^ unknown fact "batery" (did you mean "battery"?)
    /// ```
    pub fn render(&self, source: &str) -> String {
        let mut at = self.offset.min(source.len());
        while !source.is_char_boundary(at) {
            at -= 1;
        }
        let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[at..].find('\n').map_or(source.len(), |i| at + i);
        let printable = |c: char| if c.is_control() && c != '\t' { '?' } else { c };
        let line: String = source[line_start..line_end]
            .trim_end_matches('\r')
            .chars()
            .map(printable)
            .collect();
        let pad: String = source[line_start..at]
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!("{line}\n{pad}^ {}", self.message)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.offset + 1, self.message)
    }
}

impl std::error::Error for ParseError {}

/// A parsed requirement: a condition on a server's [`Facts`].
///
/// Two requirements are equal when their expressions are, whatever their source text:
/// `battery>=50` equals `battery >= 50`, but not `50 <= battery`.
#[derive(Debug, Clone)]
pub struct Requirement {
    source: String,
    expr: Expr,
}

impl Requirement {
    /// Parses a requirement. An empty or blank source is [`Requirement::always`].
    pub fn parse(source: &str) -> Result<Requirement, ParseError> {
        let expr = Parser::parse(source)?;
        Ok(Requirement {
            source: source.to_string(),
            expr,
        })
    }

    /// The requirement that always holds (what an empty source parses to).
    pub fn always() -> Requirement {
        Requirement {
            source: String::new(),
            expr: Expr::Bool(true),
        }
    }

    /// Whether this is the requirement that always holds: an empty source or `true`.
    pub fn is_always(&self) -> bool {
        matches!(self.expr, Expr::Bool(true))
    }

    /// The text it was parsed from, as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Checks the requirement against what a server knows now. Deterministic; see the module
    /// documentation for unknown facts and for how a failure is explained.
    pub fn check(&self, facts: &Facts) -> Verdict {
        let outcome = eval(&self.expr, facts);
        if outcome.truth == Truth::True {
            Verdict::Pass
        } else {
            Verdict::Fail(outcome.explain())
        }
    }

    /// The facts it names (number and yes/no), sorted, without repeats: what a server needs
    /// to know to check it.
    pub fn facts(&self) -> BTreeSet<&'static str> {
        let mut out = BTreeSet::new();
        self.expr.walk(&mut |e| match e {
            Expr::Flag(id) => {
                out.insert(id.name());
            }
            Expr::Compare(c) => {
                out.insert(c.fact.name());
            }
            _ => {}
        });
        out
    }

    /// The tags it names in `has(…)`, in lower case, sorted, without repeats.
    pub fn tags(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        self.expr.walk(&mut |e| {
            if let Expr::Has(tag) = e {
                out.insert(tag.as_str());
            }
        });
        out
    }
}

impl Default for Requirement {
    fn default() -> Requirement {
        Requirement::always()
    }
}

impl PartialEq for Requirement {
    fn eq(&self, other: &Requirement) -> bool {
        self.expr == other.expr
    }
}

impl FromStr for Requirement {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Requirement, ParseError> {
        Requirement::parse(s)
    }
}

impl fmt::Display for Requirement {
    /// The canonical form (see the module documentation).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.expr.fmt(f)
    }
}

// ---------------------------------------------------------------------------------------------
// The expression tree.

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Bool(bool),
    Flag(FactId),
    Has(String),
    Compare(Compare),
    Not(Box<Expr>),
    /// At least two clauses.
    And(Vec<Expr>),
    /// At least two branches.
    Or(Vec<Expr>),
}

impl Expr {
    fn walk<'e>(&'e self, visit: &mut dyn FnMut(&'e Expr)) {
        visit(self);
        match self {
            Expr::Not(inner) => inner.walk(visit),
            Expr::And(items) | Expr::Or(items) => {
                for item in items {
                    item.walk(visit);
                }
            }
            Expr::Bool(_) | Expr::Flag(_) | Expr::Has(_) | Expr::Compare(_) => {}
        }
    }
}

fn join(
    f: &mut fmt::Formatter<'_>,
    items: &[Expr],
    op: &str,
    needs_parens: fn(&Expr) -> bool,
) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(op)?;
        }
        if needs_parens(item) {
            write!(f, "({item})")?;
        } else {
            write!(f, "{item}")?;
        }
    }
    Ok(())
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Bool(b) => write!(f, "{b}"),
            Expr::Flag(id) => f.write_str(id.name()),
            Expr::Has(tag) => write!(f, "has({tag})"),
            Expr::Compare(c) => write!(f, "{c}"),
            Expr::Not(inner) => match **inner {
                Expr::Compare(_) | Expr::And(_) | Expr::Or(_) => write!(f, "!({inner})"),
                Expr::Bool(_) | Expr::Flag(_) | Expr::Has(_) | Expr::Not(_) => {
                    write!(f, "!{inner}")
                }
            },
            // An `&&` inside `&&` keeps its parentheses so the tree parses back the same.
            Expr::And(items) => join(f, items, " && ", |e| {
                matches!(e, Expr::And(_) | Expr::Or(_))
            }),
            Expr::Or(items) => join(f, items, " || ", |e| matches!(e, Expr::Or(_))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    fn holds(self, left: f64, right: f64) -> bool {
        match self {
            CmpOp::Eq => left == right,
            CmpOp::Ne => left != right,
            CmpOp::Lt => left < right,
            CmpOp::Le => left <= right,
            CmpOp::Gt => left > right,
            CmpOp::Ge => left >= right,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Percent,
    B,
    Kb,
    Mb,
    Gb,
    Tb,
    Kib,
    Mib,
    Gib,
    Tib,
    S,
    Min,
    H,
    D,
}

const UNITS: [Unit; 14] = [
    Unit::Percent,
    Unit::B,
    Unit::Kb,
    Unit::Mb,
    Unit::Gb,
    Unit::Tb,
    Unit::Kib,
    Unit::Mib,
    Unit::Gib,
    Unit::Tib,
    Unit::S,
    Unit::Min,
    Unit::H,
    Unit::D,
];

const KIB: f64 = 1024.0;

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Percent => "%",
            Unit::B => "B",
            Unit::Kb => "KB",
            Unit::Mb => "MB",
            Unit::Gb => "GB",
            Unit::Tb => "TB",
            Unit::Kib => "KiB",
            Unit::Mib => "MiB",
            Unit::Gib => "GiB",
            Unit::Tib => "TiB",
            Unit::S => "s",
            Unit::Min => "min",
            Unit::H => "h",
            Unit::D => "d",
        }
    }

    fn scale(self) -> f64 {
        match self {
            Unit::Percent | Unit::B | Unit::S => 1.0,
            Unit::Kb => 1e3,
            Unit::Mb => 1e6,
            Unit::Gb => 1e9,
            Unit::Tb => 1e12,
            Unit::Kib => KIB,
            Unit::Mib => KIB * KIB,
            Unit::Gib => KIB * KIB * KIB,
            Unit::Tib => KIB * KIB * KIB * KIB,
            Unit::Min => 60.0,
            Unit::H => 3600.0,
            Unit::D => 86400.0,
        }
    }

    fn measure(self) -> Measure {
        match self {
            Unit::Percent => Measure::Percent,
            Unit::S | Unit::Min | Unit::H | Unit::D => Measure::Seconds,
            _ => Measure::Bytes,
        }
    }

    fn is_binary(self) -> bool {
        matches!(self, Unit::Kib | Unit::Mib | Unit::Gib | Unit::Tib)
    }

    fn lookup(word: &str) -> Option<Unit> {
        UNITS
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(word))
    }
}

/// A number as written, with its unit, and the value they stand for.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Quantity {
    number: f64,
    unit: Option<Unit>,
    /// `number` × the unit's scale, a function of the two (so equality is still theirs).
    value: f64,
}

impl Quantity {
    fn new(number: f64, unit: Option<Unit>) -> Quantity {
        let value = match unit {
            None => number,
            Some(unit) => scale_exactly(number, unit.scale()),
        };
        Quantity {
            number,
            unit,
            value,
        }
    }

    fn value(self) -> f64 {
        self.value
    }
}

/// `number × scale` (a whole scale), computed on the number's shortest decimal text and rounded
/// once, so `1.1GB` is exactly 1100000000 bytes and `1.1h` exactly 3960 seconds (`1.1 * 1e9` in
/// floating point is 1100000000.0000002). Falls back to a floating-point product for numbers
/// with more than 38 digits.
fn scale_exactly(number: f64, scale: f64) -> f64 {
    let text = number.to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digits = format!("{whole}{fraction}");
    if scale.fract() == 0.0
        && (1.0..1e15).contains(&scale)
        && let Ok(mantissa) = digits.parse::<u128>()
        && let Some(product) = mantissa.checked_mul(scale as u128)
        && let Ok(value) = format!("{product}e-{}", fraction.len()).parse::<f64>()
    {
        return value;
    }
    number * scale
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `f64`'s Display is the shortest text that parses back to the same value, and never
        // uses an exponent.
        write!(f, "{}", self.number)?;
        if let Some(unit) = self.unit {
            f.write_str(unit.name())?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Compare {
    fact: FactId,
    op: CmpOp,
    quantity: Quantity,
    /// `battery >= 50` rather than `50 <= battery`.
    fact_first: bool,
}

impl Compare {
    fn holds(&self, fact_value: f64) -> bool {
        let quantity = self.quantity.value();
        if self.fact_first {
            self.op.holds(fact_value, quantity)
        } else {
            self.op.holds(quantity, fact_value)
        }
    }
}

impl fmt::Display for Compare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (fact, op, quantity) = (self.fact.name(), self.op.symbol(), self.quantity);
        if self.fact_first {
            write!(f, "{fact} {op} {quantity}")
        } else {
            write!(f, "{quantity} {op} {fact}")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok<'s> {
    Word(&'s str),
    /// A quantity and the offset of its unit (of the number when it has none).
    Number(Quantity, usize),
    Cmp(CmpOp),
    And,
    Or,
    Not,
    LParen,
    RParen,
    Comma,
    Eof,
}

#[derive(Debug, Clone, Copy)]
struct Token<'s> {
    tok: Tok<'s>,
    start: usize,
    end: usize,
}

/// Words a spaced unit never is: `50 has(gps)` is a number followed by `has`, not a unit.
const RESERVED: [&str; 6] = ["true", "false", "has", "and", "or", "not"];

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_tag_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// A character quoted for a message.
fn quote_char(c: char) -> String {
    format!("\"{}\"", c.escape_debug())
}

struct Parser<'s> {
    src: &'s str,
    /// Where the next token starts being looked for.
    pos: usize,
    peeked: Option<Token<'s>>,
    /// The last token consumed.
    prev: Option<Token<'s>>,
    depth: usize,
}

impl<'s> Parser<'s> {
    fn parse(src: &'s str) -> Result<Expr, ParseError> {
        if src.len() > MAX_SOURCE_LEN {
            let mut at = MAX_SOURCE_LEN;
            while !src.is_char_boundary(at) {
                at -= 1;
            }
            return Err(ParseError::new(
                at,
                format!(
                    "a requirement is at most {MAX_SOURCE_LEN} bytes long; this one is {} bytes",
                    src.len()
                ),
            ));
        }
        let mut parser = Parser {
            src,
            pos: 0,
            peeked: None,
            prev: None,
            depth: 0,
        };
        if parser.peek()?.tok == Tok::Eof {
            return Ok(Expr::Bool(true));
        }
        let expr = parser.or()?;
        let next = parser.peek()?;
        match next.tok {
            Tok::Eof => Ok(expr),
            Tok::RParen => Err(ParseError::new(
                next.start,
                "unbalanced parenthesis: this \")\" has no matching \"(\"",
            )),
            _ => Err(parser.expected_operator(next, false)),
        }
    }

    /// The error for a token where `&&`, `||` (or `)` inside parentheses) should be.
    fn expected_operator(&self, t: Token<'s>, in_parens: bool) -> ParseError {
        let message = match t.tok {
            Tok::Word("and") => "write \"&&\" instead of \"and\"".to_string(),
            Tok::Word("or") => "write \"||\" instead of \"or\"".to_string(),
            _ if in_parens => format!(
                "expected \"&&\", \"||\" or \")\" before {}",
                self.describe(t)
            ),
            _ => format!("expected \"&&\" or \"||\" before {}", self.describe(t)),
        };
        ParseError::new(t.start, message)
    }

    // --- tokens ---

    fn text(&self, t: Token<'s>) -> &'s str {
        &self.src[t.start..t.end]
    }

    /// A token for a message: `"cpus"`, or `the end`.
    fn describe(&self, t: Token<'s>) -> String {
        match t.tok {
            Tok::Eof => "the end".to_string(),
            _ => format!("\"{}\"", self.text(t)),
        }
    }

    fn skip_ws(&self, from: usize) -> usize {
        let rest = &self.src[from..];
        match rest.char_indices().find(|&(_, c)| !c.is_whitespace()) {
            Some((i, _)) => from + i,
            None => self.src.len(),
        }
    }

    fn peek(&mut self) -> Result<Token<'s>, ParseError> {
        if let Some(t) = self.peeked {
            return Ok(t);
        }
        let t = self.lex()?;
        self.peeked = Some(t);
        Ok(t)
    }

    fn bump(&mut self) -> Result<Token<'s>, ParseError> {
        let t = self.peek()?;
        self.peeked = None;
        self.pos = t.end;
        self.prev = Some(t);
        Ok(t)
    }

    fn lex(&self) -> Result<Token<'s>, ParseError> {
        let bytes = self.src.as_bytes();
        let start = self.skip_ws(self.pos);
        let Some(c) = self.src[start..].chars().next() else {
            return Ok(Token {
                tok: Tok::Eof,
                start,
                end: start,
            });
        };
        let next = bytes.get(start + 1).copied();
        let token = |tok, len| {
            Ok(Token {
                tok,
                start,
                end: start + len,
            })
        };
        let error = |message: &str| Err(ParseError::new(start, message));
        match c {
            '(' => token(Tok::LParen, 1),
            ')' => token(Tok::RParen, 1),
            ',' => token(Tok::Comma, 1),
            '&' if next == Some(b'&') => token(Tok::And, 2),
            '&' => error("\"&\" is not an operator: write \"&&\""),
            '|' if next == Some(b'|') => token(Tok::Or, 2),
            '|' => error("\"|\" is not an operator: write \"||\""),
            '!' if next == Some(b'=') => token(Tok::Cmp(CmpOp::Ne), 2),
            '!' => token(Tok::Not, 1),
            '=' => match next {
                Some(b'=') => token(Tok::Cmp(CmpOp::Eq), 2),
                Some(b'>') => error("\"=>\" is not an operator: write \">=\""),
                Some(b'<') => error("\"=<\" is not an operator: write \"<=\""),
                _ => error("\"=\" is not an operator: write \"==\""),
            },
            '<' => match next {
                Some(b'=') => token(Tok::Cmp(CmpOp::Le), 2),
                Some(b'>') => error("\"<>\" is not an operator: write \"!=\""),
                _ => token(Tok::Cmp(CmpOp::Lt), 1),
            },
            '>' => match next {
                Some(b'=') => token(Tok::Cmp(CmpOp::Ge), 2),
                _ => token(Tok::Cmp(CmpOp::Gt), 1),
            },
            '0'..='9' => self.lex_number(start),
            'a'..='z' | 'A'..='Z' | '_' => {
                let mut end = start;
                while bytes.get(end).copied().is_some_and(is_word_byte) {
                    end += 1;
                }
                token(Tok::Word(&self.src[start..end]), end - start)
            }
            '.' if next.is_some_and(|b| b.is_ascii_digit()) => {
                error("a number starts with a digit: write \"0.5\", not \".5\"")
            }
            '-' if next.is_some_and(|b| b.is_ascii_digit()) => {
                error("numbers cannot be negative (no fact is)")
            }
            '"' | '\'' | '`' => error(
                "quotes are not part of the language: write facts and tags bare, e.g. \"has(gps)\"",
            ),
            _ => Err(ParseError::new(
                start,
                format!("unexpected character {}", quote_char(c)),
            )),
        }
    }

    fn lex_number(&self, start: usize) -> Result<Token<'s>, ParseError> {
        let bytes = self.src.as_bytes();
        let digit_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
        let mut end = start;
        while digit_at(end) {
            end += 1;
        }
        if bytes.get(end) == Some(&b'.') {
            if !digit_at(end + 1) {
                return Err(ParseError::new(
                    end,
                    "expected digits after the decimal point",
                ));
            }
            end += 1;
            while digit_at(end) {
                end += 1;
            }
            if bytes.get(end) == Some(&b'.') {
                return Err(ParseError::new(
                    end,
                    "a number has one decimal point at most",
                ));
            }
        }
        let too_large = || ParseError::new(start, "number too large");
        let number: f64 = self.src[start..end].parse().map_err(|_| too_large())?;
        if !number.is_finite() {
            return Err(too_large());
        }
        // The unit, right after the number or after spaces.
        let number_end = end;
        let unit_start = self.skip_ws(number_end);
        let mut unit = None;
        let mut unit_at = start;
        if bytes.get(unit_start) == Some(&b'%') {
            unit = Some(Unit::Percent);
            unit_at = unit_start;
            end = unit_start + 1;
        } else if bytes.get(unit_start).is_some_and(u8::is_ascii_alphabetic) {
            let mut word_end = unit_start;
            while bytes
                .get(word_end)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                word_end += 1;
            }
            let word = &self.src[unit_start..word_end];
            let spaced = unit_start > number_end;
            let not_a_unit = RESERVED.contains(&word) || FactId::lookup(word).is_some();
            if !(spaced && not_a_unit) {
                let Some(u) = Unit::lookup(word) else {
                    let known: Vec<&str> = UNITS.iter().map(|u| u.name()).collect();
                    return Err(ParseError::new(
                        unit_start,
                        format!("unknown unit \"{word}\" (units: {})", known.join(", ")),
                    ));
                };
                unit = Some(u);
                unit_at = unit_start;
                end = word_end;
            }
        }
        let quantity = Quantity::new(number, unit);
        if !quantity.value().is_finite() {
            return Err(too_large());
        }
        Ok(Token {
            tok: Tok::Number(quantity, unit_at),
            start,
            end,
        })
    }

    // --- grammar ---

    fn enter(&mut self, at: usize) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::new(
                at,
                format!("nested too deeply: at most {MAX_DEPTH} levels of \"(\" and \"!\""),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let first = self.and()?;
        if self.peek()?.tok != Tok::Or {
            return Ok(first);
        }
        let mut branches = vec![first];
        while self.peek()?.tok == Tok::Or {
            self.bump()?;
            branches.push(self.and()?);
        }
        Ok(Expr::Or(branches))
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let first = self.unary()?.0;
        if self.peek()?.tok != Tok::And {
            return Ok(first);
        }
        let mut clauses = vec![first];
        while self.peek()?.tok == Tok::And {
            self.bump()?;
            clauses.push(self.unary()?.0);
        }
        Ok(Expr::And(clauses))
    }

    /// A unary expression, and whether it is a comparison written without parentheses.
    fn unary(&mut self) -> Result<(Expr, bool), ParseError> {
        let t = self.peek()?;
        if t.tok == Tok::Not {
            self.enter(t.start)?;
            self.bump()?;
            let (inner, bare_comparison) = self.unary()?;
            if bare_comparison {
                return Err(ParseError::new(
                    t.start,
                    format!("\"!\" binds tighter than a comparison: write \"!({inner})\""),
                ));
            }
            self.leave();
            return Ok((Expr::Not(Box::new(inner)), false));
        }
        let (expr, bare_comparison) = self.primary()?;
        let next = self.peek()?;
        if let Tok::Cmp(op) = next.tok {
            let message = if bare_comparison {
                "comparisons do not chain: join them with \"&&\", e.g. \"hour >= 9 && hour < 17\""
                    .to_string()
            } else {
                format!(
                    "\"{}\" cannot follow a condition: a fact is compared with a number, e.g. \"battery >= 50\"",
                    op.symbol()
                )
            };
            return Err(ParseError::new(next.start, message));
        }
        Ok((expr, bare_comparison))
    }

    fn primary(&mut self) -> Result<(Expr, bool), ParseError> {
        let before = self.prev;
        let t = self.peek()?;
        let after_before = || match before {
            Some(b) => format!("expected a condition after \"{}\"", self.text(b)),
            None => "expected a condition".to_string(),
        };
        match t.tok {
            Tok::LParen => {
                self.enter(t.start)?;
                self.bump()?;
                let inner = self.or()?;
                let close = self.peek()?;
                match close.tok {
                    Tok::RParen => {
                        self.bump()?;
                        self.leave();
                        Ok((inner, false))
                    }
                    Tok::Eof => Err(ParseError::new(
                        t.start,
                        "unbalanced parenthesis: this \"(\" is never closed",
                    )),
                    _ => Err(self.expected_operator(close, true)),
                }
            }
            Tok::Word(word) => {
                self.bump()?;
                self.word(t, word)
            }
            Tok::Number(quantity, unit_at) => {
                self.bump()?;
                self.number_first(t, quantity, unit_at)
            }
            Tok::RParen => Err(ParseError::new(
                t.start,
                match before.map(|b| b.tok) {
                    Some(Tok::LParen) => "empty parentheses: put a condition inside".to_string(),
                    None => "unbalanced parenthesis: this \")\" has no matching \"(\"".to_string(),
                    Some(_) => after_before(),
                },
            )),
            Tok::And | Tok::Or => Err(ParseError::new(
                t.start,
                match before.map(|b| b.tok) {
                    None | Some(Tok::LParen) => {
                        format!("expected a condition before \"{}\"", self.text(t))
                    }
                    Some(_) => after_before(),
                },
            )),
            Tok::Eof => Err(ParseError::new(t.start, after_before())),
            Tok::Cmp(op) => Err(ParseError::new(
                t.start,
                format!("expected a fact before \"{}\"", op.symbol()),
            )),
            Tok::Comma => Err(ParseError::new(t.start, "unexpected \",\"")),
            // `unary` takes every `!`.
            Tok::Not => Err(ParseError::new(t.start, "unexpected \"!\"")),
        }
    }

    fn word(&mut self, t: Token<'s>, word: &'s str) -> Result<(Expr, bool), ParseError> {
        match word {
            "true" => return Ok((Expr::Bool(true), false)),
            "false" => return Ok((Expr::Bool(false), false)),
            "has" => return self.has(),
            "and" => return Err(ParseError::new(t.start, "write \"&&\" instead of \"and\"")),
            "or" => return Err(ParseError::new(t.start, "write \"||\" instead of \"or\"")),
            "not" => return Err(ParseError::new(t.start, "write \"!\" instead of \"not\"")),
            _ => {}
        }
        let Some(fact) = FactId::lookup(word) else {
            let compared = matches!(self.peek().map(|n| n.tok), Ok(Tok::Cmp(_)));
            return Err(self.unknown_word(t, word, compared));
        };
        let next = self.peek()?;
        match (fact.info().kind, next.tok) {
            (FactKind::Flag, Tok::Cmp(_)) => Err(ParseError::new(t.start, flag_message(word))),
            (FactKind::Flag, _) => Ok((Expr::Flag(fact), false)),
            (FactKind::Number, Tok::Cmp(op)) => {
                self.bump()?;
                let n = self.peek()?;
                match n.tok {
                    Tok::Number(quantity, unit_at) => {
                        self.bump()?;
                        check_unit(fact, quantity, unit_at)?;
                        let compare = Compare {
                            fact,
                            op,
                            quantity,
                            fact_first: true,
                        };
                        Ok((Expr::Compare(compare), true))
                    }
                    Tok::Word(other) if FactId::lookup(other).is_some() => Err(ParseError::new(
                        n.start,
                        format!(
                            "expected a number after \"{}\" (a fact is compared with a number, not with another fact)",
                            op.symbol()
                        ),
                    )),
                    _ => Err(ParseError::new(
                        n.start,
                        format!("expected a number after \"{}\"", op.symbol()),
                    )),
                }
            }
            (FactKind::Number, _) => Err(ParseError::new(
                t.start,
                format!(
                    "\"{word}\" is a number: compare it, e.g. \"{}\"",
                    fact.info().example
                ),
            )),
        }
    }

    /// `quantity comparator fact`, the number read.
    fn number_first(
        &mut self,
        t: Token<'s>,
        quantity: Quantity,
        unit_at: usize,
    ) -> Result<(Expr, bool), ParseError> {
        let op_token = self.peek()?;
        let Tok::Cmp(op) = op_token.tok else {
            return Err(ParseError::new(
                t.start,
                "a number alone is not a condition: compare a fact with it, e.g. \"battery >= 50\"",
            ));
        };
        self.bump()?;
        let f = self.peek()?;
        let expected_fact = || {
            ParseError::new(
                f.start,
                format!("expected a fact after \"{}\"", op.symbol()),
            )
        };
        let Tok::Word(word) = f.tok else {
            return Err(expected_fact());
        };
        if RESERVED.contains(&word) {
            return Err(expected_fact());
        }
        self.bump()?;
        let Some(fact) = FactId::lookup(word) else {
            return Err(self.unknown_word(f, word, true));
        };
        if fact.info().kind == FactKind::Flag {
            return Err(ParseError::new(f.start, flag_message(word)));
        }
        check_unit(fact, quantity, unit_at)?;
        let compare = Compare {
            fact,
            op,
            quantity,
            fact_first: false,
        };
        Ok((Expr::Compare(compare), true))
    }

    /// `has ( tag )`, `has` read.
    fn has(&mut self) -> Result<(Expr, bool), ParseError> {
        let open = self.peek()?;
        if open.tok != Tok::LParen {
            return Err(ParseError::new(
                open.start,
                "expected \"(\" after \"has\", e.g. \"has(gps)\"",
            ));
        }
        self.bump()?;
        let bytes = self.src.as_bytes();
        let never_closed = || {
            ParseError::new(
                open.start,
                "unbalanced parenthesis: this \"(\" is never closed",
            )
        };
        let one_tag = |at: usize| ParseError::new(at, "has() takes one tag");
        // What follows a tag (or its absence): `)`, or an error.
        let after = |at: usize| -> ParseError {
            match self.src[at..].chars().next() {
                None => never_closed(),
                Some(',' | ')') => one_tag(at),
                Some(c) if c.is_ascii() && is_tag_byte(c as u8) => one_tag(at),
                Some('"' | '\'' | '`') => {
                    ParseError::new(at, "write the tag without quotes, e.g. \"has(gps)\"")
                }
                Some(c) => ParseError::new(
                    at,
                    format!(
                        "unexpected character {} in a tag: tags are letters, digits, \"_\" and \"-\"",
                        quote_char(c)
                    ),
                ),
            }
        };
        let tag_start = self.skip_ws(open.end);
        let mut tag_end = tag_start;
        while bytes.get(tag_end).copied().is_some_and(is_tag_byte) {
            tag_end += 1;
        }
        if tag_end == tag_start {
            return Err(after(tag_start));
        }
        let close_at = self.skip_ws(tag_end);
        if bytes.get(close_at) != Some(&b')') {
            return Err(after(close_at));
        }
        let tag = self.src[tag_start..tag_end].to_ascii_lowercase();
        self.pos = close_at;
        self.bump()?;
        Ok((Expr::Has(tag), false))
    }

    /// The error for a word that is no fact, keyword or function.
    fn unknown_word(&mut self, t: Token<'s>, word: &str, compared: bool) -> ParseError {
        let next = self.peek().ok().map(|n| n.tok);
        if next == Some(Tok::LParen) {
            return ParseError::new(
                t.start,
                match suggest(word, &["has"]) {
                    Some(s) => format!("unknown function \"{word}\" (did you mean \"{s}\"?)"),
                    None => format!("unknown function \"{word}\": the only one is \"has(tag)\""),
                },
            );
        }
        let mut candidates: Vec<&str> = FACT_TABLE.iter().map(|f| f.name).collect();
        candidates.extend(["true", "false"]);
        let message = if let Some(s) = suggest(word, &candidates) {
            format!("unknown fact \"{word}\" (did you mean \"{s}\"?)")
        } else if !compared {
            format!("unknown fact \"{word}\" (for a hardware tag, write \"has({word})\")")
        } else {
            let names: Vec<&str> = FACT_TABLE.iter().map(|f| f.name).collect();
            format!("unknown fact \"{word}\" (facts: {})", names.join(", "))
        };
        ParseError::new(t.start, message)
    }
}

fn flag_message(word: &str) -> String {
    format!("\"{word}\" is a yes/no fact: write \"{word}\" or \"!{word}\"")
}

fn check_unit(fact: FactId, quantity: Quantity, unit_at: usize) -> Result<(), ParseError> {
    let info = fact.info();
    let (Some(unit), Some(measure)) = (quantity.unit, info.measure) else {
        return Ok(());
    };
    if unit.measure() == measure {
        return Ok(());
    }
    Err(ParseError::new(
        unit_at,
        format!(
            "unit \"{}\" does not fit \"{}\", which is {}",
            unit.name(),
            info.name,
            measure.describe()
        ),
    ))
}

/// The candidate closest to `word` (ignoring case), if it is close enough to be a typo: at most
/// two edits away, one for words of three letters or fewer.
fn suggest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let word: Vec<char> = word.to_ascii_lowercase().chars().collect();
    if word.len() > 32 {
        return None;
    }
    let limit = if word.len() <= 3 { 1 } else { 2 };
    candidates
        .iter()
        .map(|c| (edit_distance(&word, &c.chars().collect::<Vec<_>>()), *c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and transpositions
/// of neighbours each count one.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, cell) in d.iter_mut().step_by(width).enumerate() {
        *cell = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

// ---------------------------------------------------------------------------------------------
// Evaluation.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Unknown,
}

impl Truth {
    fn of(b: bool) -> Truth {
        if b { Truth::True } else { Truth::False }
    }
}

/// A fact consulted while evaluating, for explanations.
#[derive(Debug, Clone)]
enum Why<'e> {
    Value(&'e Compare, f64),
    Unknown(FactId),
    Flag(FactId, bool),
    Tag(&'e str, bool),
}

impl Why<'_> {
    fn same_fact(&self, other: &Why<'_>) -> bool {
        match (self, other) {
            (Why::Tag(a, _), Why::Tag(b, _)) => a == b,
            (Why::Tag(..), _) | (_, Why::Tag(..)) => false,
            _ => self.fact() == other.fact(),
        }
    }

    fn fact(&self) -> Option<FactId> {
        match self {
            Why::Value(c, _) => Some(c.fact),
            Why::Unknown(id) | Why::Flag(id, _) => Some(*id),
            Why::Tag(..) => None,
        }
    }

    fn render(&self, lone_has: bool) -> String {
        match self {
            Why::Value(c, v) => format!("{} is {}", c.fact.name(), show_value(c, *v)),
            Why::Unknown(id) => format!("{} is unknown here", id.name()),
            Why::Flag(id, true) => id.name().to_string(),
            Why::Flag(id, false) => format!("not {}", id.name()),
            Why::Tag(tag, true) => format!("has {tag}"),
            Why::Tag(_, false) if lone_has => "no such hardware".to_string(),
            Why::Tag(tag, false) => format!("no {tag}"),
        }
    }
}

struct Outcome<'e> {
    truth: Truth,
    /// The clause that decided the outcome.
    clause: &'e Expr,
    /// The facts consulted to reach it, each once.
    why: Vec<Why<'e>>,
}

impl Outcome<'_> {
    fn explain(&self) -> String {
        let mut out = self.clause.to_string();
        if !self.why.is_empty() {
            let lone_has = matches!(self.clause, Expr::Has(_));
            let parts: Vec<String> = self.why.iter().map(|w| w.render(lone_has)).collect();
            out.push_str(" (");
            out.push_str(&parts.join(", "));
            out.push(')');
        }
        out
    }
}

fn merge<'e>(into: &mut Vec<Why<'e>>, from: Vec<Why<'e>>) {
    for why in from {
        if !into.iter().any(|w| w.same_fact(&why)) {
            into.push(why);
        }
    }
}

fn eval<'e>(expr: &'e Expr, facts: &Facts) -> Outcome<'e> {
    let outcome = |truth, why| Outcome {
        truth,
        clause: expr,
        why,
    };
    match expr {
        Expr::Bool(b) => outcome(Truth::of(*b), Vec::new()),
        Expr::Flag(id) => match facts.flag(id.name()) {
            Some(v) => outcome(Truth::of(v), vec![Why::Flag(*id, v)]),
            None => outcome(Truth::Unknown, vec![Why::Unknown(*id)]),
        },
        Expr::Has(tag) => {
            let v = facts.has_tag(tag);
            outcome(Truth::of(v), vec![Why::Tag(tag, v)])
        }
        Expr::Compare(c) => match facts.get(c.fact.name()) {
            Some(v) => outcome(Truth::of(c.holds(v)), vec![Why::Value(c, v)]),
            None => outcome(Truth::Unknown, vec![Why::Unknown(c.fact)]),
        },
        Expr::Not(inner) => {
            let o = eval(inner, facts);
            let truth = match o.truth {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                Truth::Unknown => Truth::Unknown,
            };
            outcome(truth, o.why)
        }
        Expr::And(clauses) => {
            let mut why = Vec::new();
            for clause in clauses {
                let o = eval(clause, facts);
                if o.truth != Truth::True {
                    return o;
                }
                merge(&mut why, o.why);
            }
            outcome(Truth::True, why)
        }
        Expr::Or(branches) => {
            let mut why = Vec::new();
            let mut unknown = false;
            for branch in branches {
                let o = eval(branch, facts);
                match o.truth {
                    Truth::True => return outcome(Truth::True, o.why),
                    Truth::Unknown => unknown = true,
                    Truth::False => {}
                }
                merge(&mut why, o.why);
            }
            outcome(
                if unknown {
                    Truth::Unknown
                } else {
                    Truth::False
                },
                why,
            )
        }
    }
}

/// A fact's value for an explanation: rounded, in a readable unit, unless rounding would make
/// the comparison look satisfied.
fn show_value(c: &Compare, v: f64) -> String {
    const DECIMAL: [(f64, &str); 5] = [
        (1.0, "B"),
        (1e3, "KB"),
        (1e6, "MB"),
        (1e9, "GB"),
        (1e12, "TB"),
    ];
    const BINARY: [(f64, &str); 5] = [
        (1.0, "B"),
        (KIB, "KiB"),
        (KIB * KIB, "MiB"),
        (KIB * KIB * KIB, "GiB"),
        (KIB * KIB * KIB * KIB, "TiB"),
    ];
    const TIME: [(f64, &str); 4] = [(1.0, "s"), (60.0, "min"), (3600.0, "h"), (86400.0, "d")];
    let measure = c.fact.info().measure.unwrap_or(Measure::Plain);
    let (text, shown, exact) = match measure {
        Measure::Bytes => {
            let binary = c.quantity.unit.is_some_and(Unit::is_binary);
            let units: &[(f64, &str)] = if binary { &BINARY } else { &DECIMAL };
            let (text, shown) = scaled(v, units);
            (text, shown, format!("{v} B"))
        }
        Measure::Seconds => {
            let (text, shown) = scaled(v, &TIME);
            (text, shown, format!("{v} s"))
        }
        Measure::Percent | Measure::Plain => {
            let (text, shown) = rounded(v);
            (text, shown, format!("{v}"))
        }
    };
    if c.holds(shown) == c.holds(v) {
        text
    } else {
        exact
    }
}

/// `v` in the largest of `units` it reaches (the first if none), rounded; and the value the
/// text stands for.
fn scaled(v: f64, units: &[(f64, &str)]) -> (String, f64) {
    let (scale, name) = units
        .iter()
        .rev()
        .find(|(scale, _)| v.abs() >= *scale)
        .or(units.first())
        .copied()
        .unwrap_or((1.0, ""));
    let (text, shown) = rounded(v / scale);
    (format!("{text} {name}"), shown * scale)
}

/// About three significant digits (integers stay whole), without trailing zeros; and the
/// value the text stands for.
fn rounded(x: f64) -> (String, f64) {
    let decimals = if x.fract() == 0.0 || x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    let mut text = format!("{x:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if text == "-0" {
        text = "0".to_string();
    }
    let shown = text.parse().unwrap_or(x);
    (text, shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_transpositions_once() {
        let d = |a: &str, b: &str| {
            edit_distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("batery", "battery"), 1);
        assert_eq!(d("abttery", "battery"), 1);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("cpus", "cpus"), 0);
        assert_eq!(d("gps", "cpus"), 2);
    }

    #[test]
    fn suggestions_are_close_enough_only() {
        let facts: Vec<&str> = FACT_TABLE.iter().map(|f| f.name).collect();
        assert_eq!(suggest("batery", &facts), Some("battery"));
        assert_eq!(suggest("Battery", &facts), Some("battery"));
        assert_eq!(suggest("free-disk", &facts), Some("free_disk"));
        assert_eq!(suggest("gps", &facts), None);
        assert_eq!(suggest("temperature", &facts), None);
    }

    #[test]
    fn facts_pairs_follow_the_table() {
        assert_eq!(FACTS.len(), FACT_INFO.len());
        for ((name, kind), info) in FACTS.iter().zip(FACT_INFO) {
            assert_eq!(*name, info.name);
            assert_eq!(*kind, info.kind);
            assert_eq!(info.measure.is_some(), info.kind == FactKind::Number);
        }
    }

    #[test]
    fn rounding_keeps_about_three_digits() {
        assert_eq!(rounded(31.0).0, "31");
        assert_eq!(rounded(1.23456).0, "1.23");
        assert_eq!(rounded(12.345).0, "12.3");
        assert_eq!(rounded(512.4).0, "512");
        assert_eq!(rounded(1.5).0, "1.5");
        assert_eq!(scaled(512e6, &[(1.0, "B"), (1e6, "MB")]).0, "512 MB");
    }
}

//! Typed stubs for a node's procedures (the rpcgen idea of NoWait-RPC): `ferry procedures NODE
//! --stubs python` writes a Python module with one method per procedure the node declares, its
//! parameters named and typed as declared, its docstring from the description, and each call
//! non-blocking: the method makes the call (durable in the local node before it returns) and
//! gives a `concurrent.futures.Future` of the result, so many calls are in flight at once, as
//! NoWait-RPC's split send and receive allow. An asyncio class does the same with awaitables.
//!
//! What it never does: talk to a node. It turns a list of declarations (`GET /v1/procedures`,
//! or a remote node's built-in `ferry.procedures`) into text; the module it writes uses the
//! `ferry_client` package.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use daemon::calls::ProcedureInfo;

/// Python's keywords and the names the stub classes use themselves: a parameter or procedure
/// of one of these names gets a trailing `_`.
const RESERVED: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case", "type", "self", "client", "target", "timeout", "close",
];

/// A Python identifier for a declared name: `.` and `-` become `_`, a leading digit gets `p_`,
/// a keyword a trailing `_`.
fn identifier(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if id.is_empty() || id.as_bytes()[0].is_ascii_digit() {
        id.insert_str(0, "p_");
    }
    if RESERVED.contains(&id.as_str()) || id.starts_with("__") {
        id.push('_');
    }
    id
}

/// The Python type of a parameter type.
fn param_type(ty: &str) -> &'static str {
    match ty {
        "int" => "int",
        "float" => "float",
        "bool" => "bool",
        "text" => "str",
        "bytes" => "bytes",
        "file" => "File",
        _ => "Param",
    }
}

/// The Python type of a declared value, and the expression that reads it from a `Reply` `r`.
fn returns(returns: Option<&str>) -> (&'static str, &'static str) {
    match returns {
        Some("text") => ("str", "r.text"),
        Some("bytes") => ("bytes", "r.value or b\"\""),
        Some("json") => ("Any", "json.loads(r.value or b\"null\")"),
        _ => ("Reply", "r"),
    }
}

/// A Python string literal (double-quoted, escaped) for any text.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A docstring's text: the description, without anything that would end the docstring.
fn doc_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace("\"\"\"", "\\\"\\\"\\\"")
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect()
}

/// One procedure's method, for the sync (`Future`) or asyncio (`async def`) class.
fn method(out: &mut String, p: &ProcedureInfo, name: &str, asyncio: bool) {
    let mut used = BTreeSet::new();
    let params: Vec<(String, &str)> = p
        .parameters
        .iter()
        .enumerate()
        .map(|(i, param)| {
            let mut id = param
                .name
                .as_deref()
                .map(identifier)
                .unwrap_or_else(|| format!("arg{}", i + 1));
            while !used.insert(id.clone()) {
                id.push('_');
            }
            (id, param_type(&param.ty))
        })
        .collect();
    let (value_type, read) = returns(p.returns.as_deref());
    let signature: String = params.iter().map(|(n, t)| format!(", {n}: {t}")).collect();
    let args: String = params.iter().map(|(n, _)| format!(", {n}")).collect();
    let result = if asyncio {
        format!("Awaitable[{value_type}]")
    } else {
        format!("Future[{value_type}]")
    };
    let _ = writeln!(out, "    def {name}(self{signature}) -> {result}:");
    let mut doc = String::new();
    if let Some(d) = &p.description {
        doc.push_str(&doc_text(d));
        doc.push_str("\n\n");
    }
    doc.push_str(&format!("Calls ``{}``", doc_text(&p.name)));
    if params.is_empty() {
        doc.push_str(" (no parameters)");
    } else {
        let list: Vec<String> = p
            .parameters
            .iter()
            .zip(&params)
            .map(|(decl, (n, _))| format!("{n} ({})", decl.ty))
            .collect();
        doc.push_str(&format!(" with {}", list.join(", ")));
    }
    doc.push_str(&format!(
        "; the value is {}.",
        match p.returns.as_deref() {
            Some("text") => "text",
            Some("bytes") => "bytes",
            Some("json") => "JSON, decoded",
            _ => "the whole reply (value and files)",
        }
    ));
    if p.restricted {
        doc.push_str(" Only the callers on its allow-list may call it.");
    }
    if let Some(r) = &p.require {
        doc.push_str(&format!(" It runs only when {}.", doc_text(r)));
    }
    let _ = writeln!(out, "        \"\"\"{}\"\"\"", indent_doc(&doc));
    let _ = writeln!(
        out,
        "        return self._call({}, lambda r: {read}{args})",
        literal(&p.name)
    );
    out.push('\n');
}

fn indent_doc(doc: &str) -> String {
    doc.lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 || l.is_empty() {
                l.to_owned()
            } else {
                format!("        {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module for `node`'s procedures. `command` is what wrote it (said in its header).
pub(crate) fn python(node: &str, procedures: &[ProcedureInfo], command: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\"\"\"Typed stubs for the procedures of {node}, written by `{}`.\n",
        doc_text(command)
    );
    out.push_str(
        "Each method makes its call at once (durable in the local node before it returns) and \
         gives a\n``concurrent.futures.Future`` of the value (``AsyncStubs``: an awaitable), so \
         many calls can be\nin flight at once. A call that ends without a result raises \
         ``ferry_client.CallFailed`` from\nthe future. Do not edit: write it again when the \
         node's procedures change.\n\"\"\"\n\n",
    );
    out.push_str(
        "from __future__ import annotations\n\nimport json\nfrom collections.abc import Awaitable, \
         Callable\nfrom concurrent.futures import Future, ThreadPoolExecutor\nfrom typing import \
         Any, TypeVar\n\nfrom ferry_client import AsyncClient, Client, Duration, File, Param, \
         Reply\n\n",
    );
    let _ = writeln!(out, "NODE = {}", literal(node));
    out.push_str("\n_T = TypeVar(\"_T\")\n\n\n");
    out.push_str(
        r#"class Stubs:
    """The node's procedures, each call a ``Future``: ``client`` is the local node's API (default
    ``Client()``), ``target`` whom to call (default the node the stubs were written for; ``any``
    or ``all`` for a broadcast), ``deadline`` each call's, ``max_in_flight`` how many results
    are waited for at once."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        target: str = NODE,
        deadline: Duration = "10m",
        max_in_flight: int = 64,
    ) -> None:
        self.client = client or Client()
        self.target = target
        self.deadline = deadline
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="ferry-stub")

    def close(self) -> None:
        """Stops waiting for results (calls made go on in the node)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Stubs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, procedure: str, read: Callable[[Reply], _T], *params: Param) -> Future[_T]:
        call = self.client.call(self.target, procedure, *params, deadline=self.deadline)

        def wait() -> _T:
            return read(self.client.result(call.id, timeout=86_400))

        return self._pool.submit(wait)

"#,
    );
    let mut names = BTreeSet::new();
    let listed: Vec<(&ProcedureInfo, String)> = procedures
        .iter()
        .filter(|p| p.name != "ferry.procedures")
        .map(|p| {
            let mut id = identifier(&p.name);
            if id.starts_with('_') {
                id.insert(0, 'p');
            }
            while !names.insert(id.clone()) {
                id.push('_');
            }
            (p, id)
        })
        .collect();
    for (p, name) in &listed {
        method(&mut out, p, name, false);
    }
    out.push_str(
        r#"
class AsyncStubs:
    """The node's procedures for asyncio: each method makes its call and returns an awaitable
    of the value (``asyncio.gather`` runs many at once)."""

    def __init__(
        self, client: AsyncClient | None = None, *, target: str = NODE, deadline: Duration = "10m"
    ) -> None:
        self.client = client or AsyncClient()
        self.target = target
        self.deadline = deadline

    def _call(self, procedure: str, read: Callable[[Reply], _T], *params: Param) -> Awaitable[_T]:
        async def run() -> _T:
            call = await self.client.call(self.target, procedure, *params, deadline=self.deadline)
            return read(await self.client.result(call.id, timeout=86_400))

        return run()

"#,
    );
    for (p, name) in &listed {
        method(&mut out, p, name, true);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use daemon::calls::ParamInfo;

    #[test]
    fn names_become_python_identifiers() {
        assert_eq!(identifier("photo"), "photo");
        assert_eq!(identifier("sensor.read-all"), "sensor_read_all");
        assert_eq!(identifier("3d"), "p_3d");
        assert_eq!(identifier("class"), "class_");
        assert_eq!(identifier("self"), "self_");
        assert_eq!(identifier("__init__"), "__init___");
    }

    #[test]
    fn text_from_a_node_cannot_break_out_of_its_strings() {
        assert_eq!(literal("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\x01\"");
        let p = ProcedureInfo {
            name: "x".into(),
            params: vec!["text".into()],
            parameters: vec![ParamInfo {
                name: Some("q".into()),
                ty: "text".into(),
            }],
            returns: Some("text".into()),
            served_by: "program".into(),
            connected: None,
            description: Some("ends \"\"\" here\\\nimport os".into()),
            max_concurrent: 1,
            require: None,
            restricted: false,
            executions: 0,
        };
        let module = python("dtn://n/", &[p], "ferry procedures n --stubs python");
        assert!(module.contains("ends \\\"\\\"\\\" here\\\\"), "{module}");
        assert_eq!(module.matches("\"\"\"").count() % 2, 0);
        assert!(
            module.contains("    def x(self, q: str) -> Future[str]:"),
            "{module}"
        );
        assert!(
            module.contains("    def x(self, q: str) -> Awaitable[str]:"),
            "{module}"
        );
    }
}

//! Where ONNX Runtime placed each node, read from its own verbose session log: "All nodes placed on [EP]. Number of
//! nodes: N", or per provider " Node(s) placed on [EP]. Number of nodes: N" followed by one `  OpType (name)` line a
//! node. A provider asked for that runs none of the model's nodes is refused: ONNX Runtime would quietly run them all
//! on its CPU provider, and a report naming the provider would describe work it did not do.

use crate::error::Error;
pub use crate::facts::Placed;

/// The placement messages of one session's log: each provider's header, with the node lines ONNX Runtime logs after
/// it one message each (`  OpType (name)`) joined to it.
#[derive(Debug, Default)]
pub struct Log {
    pub messages: Vec<String>,
    /// The last message kept was a header or a node line: a node line may follow.
    open: bool,
}

impl Log {
    /// Takes one message of the session's log.
    pub fn capture(&mut self, msg: &str) {
        let node_line = msg.starts_with("  ") && msg.trim_end().ends_with(')');
        if msg.contains("placed on [") {
            self.messages.push(msg.to_string());
            self.open = true;
        } else if let (true, true, Some(last)) = (self.open, node_line, self.messages.last_mut()) {
            last.push('\n');
            last.push_str(msg.trim_end());
        } else {
            // Anything else ends the block: later messages are not node lines.
            self.open = false;
        }
    }
}

/// Reads the placement messages of one session.
pub fn parse(messages: &[String]) -> Vec<Placed> {
    let mut out: Vec<Placed> = Vec::new();
    for m in messages {
        let mut lines = m.lines();
        while let Some(line) = lines.next() {
            let Some((provider, count)) = header(line) else {
                continue;
            };
            let nodes: Vec<String> = lines
                .clone()
                .take_while(|l| header(l).is_none() && l.starts_with("  "))
                .map(|l| l.trim().to_string())
                .collect();
            out.push(Placed {
                provider,
                count,
                nodes,
            });
        }
    }
    out
}

/// `(provider, count)` of a line that opens a provider's placement.
fn header(line: &str) -> Option<(String, usize)> {
    let rest = line.split("placed on [").nth(1)?;
    let (provider, tail) = rest.split_once(']')?;
    let count = tail
        .split("Number of nodes:")
        .nth(1)
        .and_then(|n| n.trim().trim_end_matches('.').parse().ok())
        .unwrap_or(0);
    Some((provider.to_string(), count))
}

/// `ggml 9 of 13 nodes; CPUExecutionProvider 4: MaxPool, GlobalAveragePool`: the placement in one line (op types of
/// the providers other than `requested`, at most six).
pub fn summary(placed: &[Placed], requested: &str) -> String {
    let total: usize = placed.iter().map(|p| p.count).sum();
    let parts: Vec<String> = placed
        .iter()
        .map(|p| match (p.provider == requested, p.nodes.is_empty()) {
            (true, _) | (false, true) => format!("{} {} of {total} nodes", p.provider, p.count),
            (false, false) => format!("{} {}: {}", p.provider, p.count, op_types(p, 6)),
        })
        .collect();
    parts.join("; ")
}

/// The distinct op types of `p`'s nodes, at most `most` (then `…`).
fn op_types(p: &Placed, most: usize) -> String {
    let mut ops: Vec<&str> = Vec::new();
    for n in &p.nodes {
        let op = n.split(" (").next().unwrap_or(n);
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    let more = ops.len() > most;
    ops.truncate(most);
    ops.join(", ") + if more { ", …" } else { "" }
}

/// The error for a session in which `requested` (not the CPU provider) ran no node, with the ops it left to the
/// others; `None` when it ran some, or when ONNX Runtime logged no placement.
pub fn refused(placed: &[Placed], requested: &str, hint: &str) -> Option<Error> {
    if placed.is_empty() || requested == "CPUExecutionProvider" {
        return None;
    }
    if placed
        .iter()
        .any(|p| p.provider == requested && p.count > 0)
    {
        return None;
    }
    let total: usize = placed.iter().map(|p| p.count).sum();
    let others: Vec<String> = placed
        .iter()
        .map(|p| match p.nodes.is_empty() {
            true => format!("{} ran all {}", p.provider, p.count),
            false => format!("{} ran {} ({})", p.provider, p.count, op_types(p, 12)),
        })
        .collect();
    Some(Error::Usage(format!(
        "--ep {requested}: the provider ran none of the {total} nodes of ONNX Runtime's session graph: ONNX Runtime \
         gave them to another provider ({}), and a comparison would describe a provider that did no work\n  hint: \
         {hint}",
        others.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Vec<String> {
        vec![
            " Node(s) placed on [ggml]. Number of nodes: 2\n  MatMul (q_proj)\n  MatMul (k_proj)\n".into(),
            " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 3\n  Shape (s)\n  Gather (g)\n  Shape (t)\n"
                .into(),
        ]
    }

    #[test]
    fn placement_is_read_per_provider_and_node() {
        let p = parse(&log());
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].provider.as_str(), p[0].count), ("ggml", 2));
        assert_eq!(p[1].nodes, ["Shape (s)", "Gather (g)", "Shape (t)"]);
        assert_eq!(
            summary(&p, "ggml"),
            "ggml 2 of 5 nodes; CPUExecutionProvider 3: Shape, Gather"
        );
        assert!(refused(&p, "ggml", "").is_none());
    }

    #[test]
    fn node_lines_logged_one_by_one_join_their_header() {
        let mut log = Log::default();
        for m in [
            "Node placements",
            " Node(s) placed on [ggml]. Number of nodes: 1",
            "  ggml_171_0 (ggml_ggml_171_0_0)",
            " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
            "  GlobalAveragePool (gap)",
            "SaveMLValueNameIndexMapping",
            "  Later (message)",
        ] {
            log.capture(m);
        }
        let p = parse(&log.messages);
        assert_eq!(p[0].nodes, ["ggml_171_0 (ggml_ggml_171_0_0)"]);
        assert_eq!(p[1].nodes, ["GlobalAveragePool (gap)"]);
        assert_eq!(
            summary(&p, "ggml"),
            "ggml 1 of 2 nodes; CPUExecutionProvider 1: GlobalAveragePool"
        );
    }

    #[test]
    fn a_provider_that_ran_nothing_is_refused() {
        let all =
            vec!["All nodes placed on [CPUExecutionProvider]. Number of nodes: 10".to_string()];
        let p = parse(&all);
        assert_eq!((p[0].count, p[0].nodes.len()), (10, 0));
        let e = refused(&p, "ggml", "try --ep-option").unwrap().to_string();
        assert!(
            e.contains("--ep ggml: the provider ran none of the 10 nodes"),
            "{e}"
        );
        assert!(refused(&p, "CPUExecutionProvider", "").is_none());
    }
}

//! JUnit XML: `<testsuite>`s of test cases, for CI systems that display test results.

/// One test case: name, class name, the failure message when it failed, the reason when it was skipped.
#[derive(Default)]
pub struct Case {
    pub name: String,
    pub class: String,
    pub failure: Option<String>,
    pub skipped: Option<String>,
}

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => " ".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Renders a test suite.
pub fn render(suite: &str, cases: &[Case]) -> String {
    render_suites(&[(suite.to_string(), cases)])
}

/// Renders several test suites in one document.
pub fn render_suites(suites: &[(String, &[Case])]) -> String {
    let mut s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n".to_string();
    for (suite, cases) in suites {
        let failures = cases.iter().filter(|c| c.failure.is_some()).count();
        let skipped = cases.iter().filter(|c| c.skipped.is_some()).count();
        s.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
            escape(suite),
            cases.len()
        ));
        for c in cases.iter() {
            s.push_str(&case(c));
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

fn case(c: &Case) -> String {
    let open = format!(
        "    <testcase classname=\"{}\" name=\"{}\"",
        escape(&c.class),
        escape(&c.name)
    );
    match (&c.failure, &c.skipped) {
        (Some(m), _) => format!(
            "{open}>\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
            escape(m.lines().next().unwrap_or("")),
            escape(m)
        ),
        (None, Some(m)) => format!(
            "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
            escape(m)
        ),
        (None, None) => open + "/>\n",
    }
}

/// The `phantom onnx` report as JUnit: a case per model output, and one per failing intermediate value.
pub fn from_report(r: &super::Report) -> String {
    render(&format!("phantom onnx {}", r.model.path), &cases(r))
}

/// The cases of one report: a case per model output, one per failing intermediate value (skipped, not failed,
/// where the target's precision explains it) and one failing case per anomaly.
pub fn cases(r: &super::Report) -> Vec<Case> {
    use super::model::ValueStatus;
    let mut cases = vec![];
    let limited = |v: &str| r.verdict.precision_limited.iter().any(|p| p.value == v);
    for (n, v) in r.values() {
        let failing = v.status == ValueStatus::Fail;
        if !v.is_output && !failing {
            continue;
        }
        let name = format!("#{} {} {} → {}", n.index, n.op_type, n.name, v.name);
        let insufficient =
            v.is_output && r.verdict.status == super::model::Status::PrecisionInsufficient;
        if failing && limited(&v.name) && !insufficient {
            cases.push(Case {
                name,
                class: "phantom.precision_limited".into(),
                skipped: Some(
                    "precision-limited: the correctly rounded run is out of tolerance here too"
                        .into(),
                ),
                ..Default::default()
            });
            continue;
        }
        let failure = failing.then(|| match &v.metrics {
            Some(m) => format!(
                "{} of {} elements out of tolerance; max abs {:e}, max rel {:e}, max ulp {}",
                m.failed, m.elements, m.max_abs, m.max_rel, m.max_ulp
            ),
            None => v.reason.clone().unwrap_or_else(|| "failed".into()),
        });
        let kind = if v.is_output { "output" } else { "node" };
        cases.push(Case {
            name,
            class: format!("phantom.{kind}"),
            failure,
            ..Default::default()
        });
    }
    cases.extend(r.verdict.anomalies.iter().map(|a| Case {
        name: format!("#{} {} {} → {}", a.node_index, a.op_type, a.node, a.value),
        class: "phantom.anomaly".into(),
        failure: Some(a.summary.clone()),
        ..Default::default()
    }));
    cases.extend(not_measured(r));
    cases
}

/// A skipped case per figure an optional stage could not measure on a node, with the reason.
fn not_measured(r: &super::Report) -> impl Iterator<Item = Case> + '_ {
    r.nodes.iter().flat_map(|n| {
        n.not_measured.iter().map(move |(what, why)| Case {
            name: format!("#{} {} {}: {what}", n.index, n.op_type, n.name),
            class: "phantom.not_measured".into(),
            skipped: Some(format!("{what} not measured: {why}")),
            ..Default::default()
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_and_counts() {
        let cases = vec![
            super::Case {
                name: "a<b>".into(),
                class: "c".into(),
                failure: None,
                skipped: None,
            },
            super::Case {
                name: "x".into(),
                class: "c".into(),
                failure: Some("1 & 2".into()),
                skipped: None,
            },
        ];
        let x = super::render("s\"", &cases);
        assert!(x.contains("tests=\"2\" failures=\"1\""));
        assert!(x.contains("a&lt;b&gt;") && x.contains("1 &amp; 2") && x.contains("s&quot;"));
    }
}

//! One emitter for the files a report is written as (JSON, JUnit, Markdown, HTML), whichever report it is: one
//! target's, several targets', a dump diff's. Each file is replaced atomically, so a failed run never leaves half
//! of one.

use std::path::Path;

use anyhow::Context;

use super::model::multi::MultiReport;
use super::model::Report;
use crate::fsutil::write_output;

/// Where each format goes (`None`: not asked for).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outputs<'a> {
    pub json: Option<&'a Path>,
    pub junit: Option<&'a Path>,
    pub markdown: Option<&'a Path>,
    pub html: Option<&'a Path>,
}

/// A report in each format it can be written as.
pub trait Formats {
    fn json(&self) -> anyhow::Result<Vec<u8>>;
    fn junit(&self) -> String;
    fn markdown(&self) -> String;
    fn html(&self) -> String;
}

/// Writes `report` in every format `out` asks for: JSON, JUnit, Markdown, HTML, in that order.
pub fn write(report: &impl Formats, out: Outputs) -> anyhow::Result<()> {
    let put = |path: Option<&Path>, what: &str, bytes: &dyn Fn() -> anyhow::Result<Vec<u8>>| {
        let Some(p) = path else {
            return Ok(());
        };
        write_output(p, &bytes()?).with_context(|| format!("writing the {what} to {}", p.display()))
    };
    put(out.json, "JSON report", &|| report.json())?;
    put(out.junit, "JUnit report", &|| {
        Ok(report.junit().into_bytes())
    })?;
    put(out.markdown, "Markdown summary", &|| {
        Ok(report.markdown().into_bytes())
    })?;
    put(out.html, "HTML report", &|| Ok(report.html().into_bytes()))
}

impl Formats for Report {
    fn json(&self) -> anyhow::Result<Vec<u8>> {
        Ok(super::json::to_string(self).into_bytes())
    }
    fn junit(&self) -> String {
        super::junit::from_report(self)
    }
    fn markdown(&self) -> String {
        super::markdown::render(self)
    }
    fn html(&self) -> String {
        super::html::render(self)
    }
}

impl Formats for MultiReport {
    fn json(&self) -> anyhow::Result<Vec<u8>> {
        serde_json::to_vec_pretty(self).context("serializing the report")
    }
    fn junit(&self) -> String {
        super::multi::junit::render(self)
    }
    fn markdown(&self) -> String {
        super::multi::markdown::render(self)
    }
    fn html(&self) -> String {
        super::multi::html::render(self)
    }
}

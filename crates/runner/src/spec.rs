//! A target's spec ([`phantom_engine::spec`]: plain data, re-exported here) checked against what this build knows:
//! the execution provider's name and its options, then the rules that need no runtime.

pub use phantom_engine::spec::*;
pub use phantom_engine::Named;

use crate::error::{Error, Result};
use crate::providers::Provider;

/// The table entry of the provider `o` names.
pub fn provider(o: &OrtSpec) -> Result<&'static Provider> {
    Provider::find(&o.provider).ok_or_else(|| {
        Error::Usage(format!(
            "--ep {}: not a target phantom knows; choose one of {}, or wgpu",
            o.provider,
            Provider::names().join(", ")
        ))
    })
}

/// Refuses a target no engine can honour, naming the option: an unknown provider, options its registration
/// refuses, and the combinations [`TargetSpec::check_combinations`] refuses.
pub fn check(spec: &TargetSpec) -> Result<()> {
    if let Engine::Ort(o) = &spec.engine {
        let p = provider(o)?;
        let opts: Vec<(String, String)> = o.options.clone().into_iter().collect();
        // A plugin-only provider has no registration to check: its plugin takes the options.
        let checked = match p.plugin_only() {
            true => Ok(None),
            false => p.dispatch(&opts),
        };
        if let Err(e) = checked {
            return Err(Error::Usage(format!("--ep-option on --ep {}: {e}", p.cli)));
        }
    }
    spec.check_combinations()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_provider_is_refused_with_the_known_ones() {
        let unknown = TargetSpec {
            engine: Engine::Ort(OrtSpec::new("tpu")),
            precision: None,
            model: None,
        };
        assert!(check(&unknown)
            .unwrap_err()
            .to_string()
            .contains("tensorrt"));
        check(&TargetSpec::ort_cpu()).unwrap();
    }
}

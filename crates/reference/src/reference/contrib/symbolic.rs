//! Output facts of a contrib kernel whose inputs have symbolic dims (a length computed from the data, as in a
//! VITS duration predictor): the kernel's shape rule runs twice, each symbol stood in by a different sentinel
//! each time. An output dim equal to one symbol's sentinel in both runs is that symbol; a dim equal in both runs
//! is concrete; anything else (a dim computed from a symbol, like half of it) is refused, as are shapes the
//! kernel rejects with the sentinels, since the kernel's checks cannot be made on an unknown length.

use anyhow::{anyhow, ensure};
use tract_onnx::prelude::*;
use tract_onnx::tract_hir::internal::DimLike;

use super::node::Fact;

/// Two sets of sentinels, primes far from any dim a kernel derives from a concrete one; a symbol's stand-in in
/// the first run is `FIRST[k]`, in the second `SECOND[k]`.
const FIRST: [usize; 6] = [100_003, 100_019, 100_043, 100_049, 100_057, 100_069];
const SECOND: [usize; 6] = [200_003, 200_009, 200_017, 200_023, 200_029, 200_033];

/// A shape in tract's terms: element type and dims, some of them symbolic.
pub type SymFact = (DatumType, TVec<TDim>);

/// The kernel's output facts (`rule`, on concrete shapes) for inputs that may have symbolic dims.
pub fn facts(
    ins: &[SymFact],
    rule: impl Fn(&[Fact]) -> TractResult<Vec<Fact>>,
) -> TractResult<Vec<SymFact>> {
    let symbols = symbols_of(ins)?;
    if symbols.is_empty() {
        let concrete = stood_in(ins, &symbols, &FIRST)?;
        return Ok(rule(&concrete)?.into_iter().map(widen).collect());
    }
    let first = rule(&stood_in(ins, &symbols, &FIRST)?)?;
    let second = rule(&stood_in(ins, &symbols, &SECOND)?)?;
    ensure!(
        first.len() == second.len(),
        "outputs differ with the length"
    );
    first
        .into_iter()
        .zip(second)
        .map(|(a, b)| {
            ensure!(
                a.0 == b.0 && a.1.len() == b.1.len(),
                "outputs differ with the length"
            );
            let dims = (a.1.iter().zip(&b.1))
                .map(|(&x, &y)| dim_back(x, y, &symbols))
                .collect::<TractResult<TVec<TDim>>>()?;
            Ok((a.0, dims))
        })
        .collect()
}

/// Whether any input has a symbolic dim.
pub fn any(ins: &[SymFact]) -> bool {
    (ins.iter()).any(|(_, s)| s.iter().any(|d| d.to_usize().is_err()))
}

/// A concrete fact in tract's terms.
fn widen((dt, shape): Fact) -> SymFact {
    (dt, shape.iter().map(|&d| d.to_dim()).collect())
}

/// The distinct symbolic dims among the inputs, in order of appearance.
fn symbols_of(ins: &[SymFact]) -> TractResult<Vec<TDim>> {
    let mut symbols: Vec<TDim> = vec![];
    for d in ins.iter().flat_map(|(_, s)| s.iter()) {
        if d.to_usize().is_err() && !symbols.contains(d) {
            symbols.push(d.clone());
        }
    }
    ensure!(
        symbols.len() <= FIRST.len(),
        "{} distinct symbolic dims",
        symbols.len()
    );
    Ok(symbols)
}

/// The inputs with every symbol replaced by its sentinel in `set`.
fn stood_in(ins: &[SymFact], symbols: &[TDim], set: &[usize]) -> TractResult<Vec<Fact>> {
    ins.iter()
        .map(|(dt, shape)| {
            let dims = shape
                .iter()
                .map(|d| match d.to_usize() {
                    Ok(v) => Ok(v),
                    Err(_) => symbols
                        .iter()
                        .position(|s| s == d)
                        .map(|k| set[k])
                        .ok_or_else(|| anyhow!("no stand-in for {d}")),
                })
                .collect::<TractResult<Vec<usize>>>()?;
            Ok((*dt, dims))
        })
        .collect()
}

/// An output dim from its two runs: the same concrete value, or the same symbol's sentinel in both.
fn dim_back(x: usize, y: usize, symbols: &[TDim]) -> TractResult<TDim> {
    if let Some(k) = FIRST.iter().position(|&f| f == x) {
        if SECOND.get(k) == Some(&y) && k < symbols.len() {
            return Ok(symbols[k].clone());
        }
    }
    ensure!(x == y, "an output dim is computed from a symbolic one");
    Ok(x.to_dim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str) -> TDim {
        SymbolScope::default().sym(name).into()
    }

    #[test]
    fn a_symbol_passed_through_comes_back_and_a_derived_dim_is_refused() {
        let n = sym("n");
        let ins = vec![(f32::datum_type(), tvec![1.to_dim(), n.clone(), 11.to_dim()])];
        let same = facts(&ins, |f| Ok(vec![f[0].clone()])).unwrap();
        assert_eq!(same[0].1, tvec![1.to_dim(), n, 11.to_dim()]);
        let halved = facts(&ins, |f| {
            let mut s = f[0].1.clone();
            s[1] /= 2;
            Ok(vec![(f[0].0, s)])
        });
        assert!(halved.is_err());
        let plus_one = facts(&ins, |f| Ok(vec![(f[0].0, vec![f[0].1[1] + 1])]));
        assert!(plus_one.is_err());
    }
}

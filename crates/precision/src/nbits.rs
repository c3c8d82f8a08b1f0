//! ONNX Runtime's `MatMulNBits` weight (`com.microsoft`: 2-, 4- or 8-bit codes packed along K, a scale and a zero
//! point per block of K, blocks optionally reordered by `g_idx`) dequantized in f64 to its [N, K] values. The f64
//! reference's kernel computes with it, and the causes read it to size the error of quantizing the activations.

/// One `MatMulNBits` weight as its node's attributes and inputs give it.
pub struct Packed<'a> {
    /// K (the reduction length) and N (the output columns).
    pub k: usize,
    pub n: usize,
    pub bits: usize,
    pub block: usize,
    /// B: N rows of blocks, each block's codes packed in whole bytes.
    pub b: &'a [u8],
    /// A scale per (row, block).
    pub scales: &'a [f64],
    /// Zero points: absent (2^(bits−1)), float per (row, block), or packed codes.
    pub zero_points: ZeroPoints<'a>,
    /// The block of each of the K columns, where the blocks are reordered.
    pub g_idx: Option<&'a [i64]>,
}

/// A `MatMulNBits` node's zero points.
pub enum ZeroPoints<'a> {
    Default,
    Float(&'a [f64]),
    Packed(&'a [u8]),
}

impl Packed<'_> {
    /// The [N, K] weight, row-major, or what in the inputs contradicts the attributes.
    pub fn dequantize(&self) -> Result<Vec<f64>, String> {
        let (k, nn, bits, block) = (self.k, self.n, self.bits, self.block);
        if !matches!(bits, 2 | 4 | 8) {
            return Err(format!("bits = {bits}: MatMulNBits packs 2, 4 or 8 bits"));
        }
        if block == 0 {
            return Err("block_size must be positive".into());
        }
        let (pack, mask) = (8 / bits, (1u16 << bits) - 1);
        let blocks = k.div_ceil(block);
        let row_bytes = blocks * block.div_ceil(pack);
        let b = self.b;
        if b.len() != nn * row_bytes {
            return Err(format!(
                "B has {} bytes, expected N·blocks·blob = {}",
                b.len(),
                nn * row_bytes
            ));
        }
        if self.scales.len() != nn * blocks {
            return Err(format!(
                "scales has {} values, expected N·blocks = {}",
                self.scales.len(),
                nn * blocks
            ));
        }
        let zp = self.zero_points(nn, blocks)?;
        let unpack = |bytes: &[u8], i: usize| {
            ((bytes[i / pack] as u16 >> (bits * (i % pack))) & mask) as f64
        };
        let mut w = vec![0.0; nn * k];
        for r in 0..nn {
            let bytes = &b[r * row_bytes..][..row_bytes];
            for c in 0..k {
                let blk = match self.g_idx {
                    Some(g) => {
                        let j = g[c];
                        if j < 0 || j as usize >= blocks {
                            return Err(format!("g_idx[{c}] = {j} is not a block"));
                        }
                        j as usize
                    }
                    None => c / block,
                };
                // Blocks are contiguous and hold a whole number of bytes, so element c is at bit offset c·bits.
                w[r * k + c] =
                    (unpack(bytes, c) - zp[r * blocks + blk]) * self.scales[r * blocks + blk];
            }
        }
        Ok(w)
    }

    /// Zero point of every (row, block): packed codes, float, or the default 2^(bits−1).
    fn zero_points(&self, rows: usize, blocks: usize) -> Result<Vec<f64>, String> {
        let bits = self.bits;
        match self.zero_points {
            ZeroPoints::Default => Ok(vec![(1u32 << (bits - 1)) as f64; rows * blocks]),
            ZeroPoints::Float(z) if z.len() != rows * blocks => Err(format!(
                "float zero_points has {} values, expected {}",
                z.len(),
                rows * blocks
            )),
            ZeroPoints::Float(z) => Ok(z.to_vec()),
            ZeroPoints::Packed(z) => {
                let pack = 8 / bits;
                let per_row = blocks.div_ceil(pack);
                if z.len() != rows * per_row {
                    return Err(format!(
                        "zero_points has {} bytes, expected {}",
                        z.len(),
                        rows * per_row
                    ));
                }
                let mask = (1u16 << bits) - 1;
                Ok((0..rows * blocks)
                    .map(|i| {
                        let (r, j) = (i / blocks, i % blocks);
                        ((z[r * per_row + j / pack] as u16 >> (bits * (j % pack))) & mask) as f64
                    })
                    .collect())
            }
        }
    }
}

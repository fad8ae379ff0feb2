//! Checks the tile layout and the Q4_1 quantizer against an independent reference:
//! `tests/fixtures/q4nx/gguf_reference.safetensors`, made by `make_fixtures.py` from PyPI
//! `gguf`'s reference quantizers and a loop-by-loop Python packing of the layout in the notes.

use std::path::PathBuf;

use half::bf16;
use q4nx::tile::{self, GROUPS_PER_TILE, TILE_COLS, TILE_ROWS};
use q4nx::{quantize_q4_1_tiles, DenseTensor, Tensor, TileMatrix, Weights};

fn fixture() -> Weights {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/q4nx/gguf_reference.safetensors");
    Weights::open_file(&path, None).expect("fixture opens")
}

fn dense<'a>(w: &'a Weights, name: &str) -> DenseTensor<'a> {
    match w.get(name).unwrap() {
        Tensor::Dense(d) => d,
        other => panic!("{name}: expected dense, got {}", other.describe()),
    }
}

fn bf16s(t: &DenseTensor) -> Vec<bf16> {
    t.bytes
        .chunks_exact(2)
        .map(|b| bf16::from_le_bytes([b[0], b[1]]))
        .collect()
}

const N: usize = 64;
const K: usize = 288;
const KP: usize = 512;

#[test]
fn gguf_codes_packed_by_us_match_the_python_packing_byte_for_byte() {
    let w = fixture();
    let codes = dense(&w, "gguf_codes").bytes.to_vec();
    let d = bf16s(&dense(&w, "tile_d"));
    let m = bf16s(&dense(&w, "tile_m"));
    let expected = match w.get("tiles").unwrap() {
        Tensor::Q4_1(t) => t,
        other => panic!("tiles: expected Q4_1, got {}", other.describe()),
    };
    assert_eq!((expected.rows, expected.cols), (N, KP));
    for rb in 0..N / TILE_ROWS {
        for ct in 0..KP / TILE_COLS {
            let mut c = [[0u8; TILE_COLS]; TILE_ROWS];
            let mut dd = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            let mut mm = dd;
            for r in 0..TILE_ROWS {
                let row = rb * TILE_ROWS + r;
                for (col, code) in c[r].iter_mut().enumerate() {
                    let k = ct * TILE_COLS + col;
                    if k < K {
                        *code = codes[row * K + k];
                    }
                }
                for g in 0..GROUPS_PER_TILE {
                    dd[r][g] = d[row * 16 + ct * 8 + g];
                    mm[r][g] = m[row * 16 + ct * 8 + g];
                }
            }
            let mut ours = vec![0u8; tile::Q4_1_TILE_BYTES];
            tile::pack_q4_1_tile(&c, &dd, &mm, &mut ours);
            assert!(
                ours == expected.tile(rb, ct),
                "tile ({rb}, {ct}) differs from the Python packing"
            );
        }
    }
}

#[test]
fn python_tiles_dequantize_to_code_times_d_plus_m() {
    let w = fixture();
    let codes = dense(&w, "gguf_codes").bytes.to_vec();
    let d = bf16s(&dense(&w, "tile_d"));
    let m = bf16s(&dense(&w, "tile_m"));
    let Tensor::Q4_1(tiles) = w.get("tiles").unwrap() else {
        panic!("tiles are Q4_1")
    };
    let deq = tiles.dequantize();
    for r in 0..N {
        for k in 0..KP {
            let expected = if k < K {
                let g = k / 32;
                f32::from(codes[r * K + k]) * d[r * 16 + g].to_f32() + m[r * 16 + g].to_f32()
            } else {
                0.0
            };
            assert_eq!(deq[r * KP + k], expected, "row {r} col {k}");
        }
    }
}

#[test]
fn our_quantizer_stays_within_its_bound_and_close_to_gguf() {
    let w = fixture();
    let weights = dense(&w, "w").to_f32();
    let codes = dense(&w, "gguf_codes").bytes.to_vec();
    let gd = dense(&w, "gguf_d").to_f32();
    let gm = dense(&w, "gguf_m").to_f32();
    let bytes = quantize_q4_1_tiles(&weights, N, K);
    let ours = TileMatrix {
        name: "w",
        rows: N,
        cols: KP,
        last_groups: 8,
        bytes: &bytes,
    };
    let deq = ours.dequantize();
    let mut same_code = 0;
    for r in 0..N {
        for g in 0..K / 32 {
            let group = &weights[r * K + g * 32..r * K + g * 32 + 32];
            let lo = group.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let bound = q4nx::quantize::error_bound(lo, hi);
            let tile = ours.tile(r / 32, g / 8);
            for (i, &v) in group.iter().enumerate() {
                let k = g * 32 + i;
                let got = deq[r * KP + k];
                assert!(
                    (got - v).abs() <= bound,
                    "row {r} col {k}: {got} vs {v} (bound {bound})"
                );
                // gguf rounds codes against its unrounded d/min and stores them as F16; both
                // results are within about one step of each other.
                let gguf = f32::from(codes[r * K + k]) * gd[r * 9 + g] + gm[r * 9 + g];
                let step = gd[r * 9 + g];
                assert!(
                    (got - gguf).abs() <= step + bound,
                    "row {r} col {k}: ours {got} vs gguf {gguf}"
                );
                if tile::q4_1_code(tile, r % 32, k % 256) == codes[r * K + k] {
                    same_code += 1;
                }
            }
        }
    }
    let total = N * K;
    assert!(
        same_code * 100 >= total * 95,
        "codes agree with gguf on {same_code} of {total} weights; expected at least 95%"
    );
}

#[test]
fn q8_tile_layout_matches_the_python_packing() {
    let w = fixture();
    let codes = dense(&w, "q8_codes").bytes.to_vec();
    let d = dense(&w, "q8_d").to_f32();
    let Tensor::Q8(tiles) = w.get("q8_tiles").unwrap() else {
        panic!("q8_tiles are Q8")
    };
    let mut values = [[0i8; TILE_COLS]; TILE_ROWS];
    let mut dd = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
    for r in 0..TILE_ROWS {
        for c in 0..TILE_COLS {
            values[r][c] = codes[r * TILE_COLS + c] as i8;
        }
        for g in 0..GROUPS_PER_TILE {
            dd[r][g] = bf16::from_f32(d[r * 8 + g]);
        }
    }
    let mut ours = vec![0u8; tile::Q8_TILE_BYTES];
    tile::pack_q8_tile(&values, &dd, &mut ours);
    assert!(
        ours == tiles.tile(0, 0),
        "Q8 tile differs from the Python packing"
    );
    let deq = tiles.dequantize();
    for r in 0..TILE_ROWS {
        for c in 0..TILE_COLS {
            let expected = f32::from(values[r][c]) * dd[r][c / 32].to_f32();
            assert_eq!(deq[r * TILE_COLS + c], expected, "row {r} col {c}");
        }
    }
}

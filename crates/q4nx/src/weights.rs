//! All weights of a model folder, memory-mapped: `model.q4nx`, the GGUF file a
//! `gguf-link.json` names (see [`crate::gguf::link_gguf`]; read by [`gguf`]), `model.safetensors`,
//! or the shards listed in `model.safetensors.index.json`. For inference, the maps can be
//! swapped for copies in huge pages (see [`Weights::copy_into_huge_pages`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::container::{self, TensorInfo};
use crate::gguf::{rows8, GgmlType, LINK_FILE};
use crate::layout::{linear_shape, padded_cols};
use crate::tensor::{DenseTensor, GgufMatrix, Tensor, TileMatrix};
use crate::tile::{
    narrow_pieces, GROUP, GROUPS_PER_TILE, Q4_1_TILE_BYTES, Q4_K_TILE_BYTES, Q8_TILE_BYTES,
    TILE_COLS, TILE_ROWS,
};
use crate::{Dtype, Error, ModelConfig};

/// File name of a Q4NX model.
pub const Q4NX_FILE: &str = "model.q4nx";
/// File name of single-file safetensors weights.
pub const SAFETENSORS_FILE: &str = "model.safetensors";
/// File name of the shard index of sharded safetensors weights.
pub const SHARD_INDEX_FILE: &str = "model.safetensors.index.json";
/// Metadata key prefix under which Hearth records the logical `N,K` of each tiled tensor.
pub const SHAPE_KEY_PREFIX: &str = "hearth.shape.";
/// Largest N or K accepted from metadata.
const MAX_DIM: usize = 1 << 32;

/// Which container the weights came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightFormat {
    /// `model.q4nx`: quantized tiles plus BF16 embedding and norms.
    Q4nx,
    /// Plain safetensors (BF16/F16/F32), one file or sharded.
    Safetensors,
    /// A GGUF file read where it lies, through a `gguf-link.json`: linear weights and the
    /// embedding in the file's own blocks, norms as floats.
    Gguf,
}

/// One memory-mapped file.
#[derive(Debug)]
struct MappedFile {
    path: PathBuf,
    map: Mmap,
    metadata: BTreeMap<String, String>,
    /// The tensor table of a safetensors/Q4NX file as opened (a copy must repeat it).
    tensors: Vec<TensorInfo>,
    /// For a GGUF file: the bytes of its header (everything before the tensor data), which a
    /// copy must repeat.
    gguf_header: Option<usize>,
}

/// Where one tensor lives.
#[derive(Debug)]
struct Entry {
    file: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    range: Range<usize>,
    /// Groups in the last tile of each row block of a tiled tensor (see
    /// [`TileMatrix::last_groups`]): 8 until [`Weights::copy_into_huge_pages`] narrows it.
    last_groups: usize,
    /// For a GGUF tensor in blocks: its type (`shape` is then `[rows, cols]`).
    gguf: Option<GgmlType>,
    /// Whether a Q4_K, Q6_K or MXFP4 matrix's rows lie in groups of 8 ([`crate::gguf::rows8`]), as
    /// [`Weights::copy_into_huge_pages`] regroups them; else row after row, as in the file.
    grouped: bool,
    /// A small tensor computed at open instead of read from the file (a Gemma norm stored as
    /// `1 + w` in a GGUF), as little-endian f32; `range` is then empty.
    owned: Option<Box<[u8]>>,
}

/// All weights of a model folder. Tensors are borrowed from the memory maps; nothing is copied.
#[derive(Debug)]
pub struct Weights {
    path: PathBuf,
    format: WeightFormat,
    files: Vec<MappedFile>,
    tensors: BTreeMap<String, Entry>,
    config: Option<ModelConfig>,
    /// Whether the files held a vision tower or projector, left out (see [`text_model_name`]).
    skipped_vision: bool,
}

impl Weights {
    /// Opens the weights of a model folder, preferring `model.q4nx`,
    /// then a `gguf-link.json` (the GGUF it names, checked against the link: see
    /// [`crate::gguf::GgufLink::open`]), then `model.safetensors`, then the shard index.
    /// Reads `config.json` beside them when present (needed to know the
    /// rows and columns of tiles stored as `[tiles, 5120]`). Every header is checked here.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let config_path = dir.join("config.json");
        let config = if config_path.is_file() {
            Some(ModelConfig::from_path(&config_path)?)
        } else {
            None
        };
        let q4nx = dir.join(Q4NX_FILE);
        let single = dir.join(SAFETENSORS_FILE);
        let index = dir.join(SHARD_INDEX_FILE);
        if q4nx.is_file() {
            let mut weights = Self::from_files(q4nx.clone(), WeightFormat::Q4nx, &[q4nx], config)?;
            flm::adapt(&mut weights)?;
            Ok(weights)
        } else if dir.join(LINK_FILE).exists() {
            gguf::open_linked(dir, config)
        } else if single.is_file() {
            Self::from_files(single.clone(), WeightFormat::Safetensors, &[single], config)
        } else if index.is_file() {
            Self::open_sharded(dir, &index, config)
        } else {
            Err(Error::NoWeights {
                dir: dir.to_path_buf(),
            })
        }
    }

    /// Opens one safetensors/Q4NX file, with an optional config to resolve tile shapes.
    pub fn open_file(path: &Path, config: Option<ModelConfig>) -> Result<Self, Error> {
        let format = if path.extension().is_some_and(|e| e == "q4nx") {
            WeightFormat::Q4nx
        } else {
            WeightFormat::Safetensors
        };
        Self::from_files(path.to_path_buf(), format, &[path.to_path_buf()], config)
    }

    fn open_sharded(dir: &Path, index: &Path, config: Option<ModelConfig>) -> Result<Self, Error> {
        let bad = |detail: String| Error::ShardIndex {
            path: index.to_path_buf(),
            detail,
        };
        // An index names each tensor once: a few MB for the largest models.
        const MAX_INDEX_BYTES: u64 = 64 << 20;
        let len = std::fs::metadata(index)
            .map_err(|e| Error::io(index, e))?
            .len();
        if len > MAX_INDEX_BYTES {
            return Err(bad(format!(
                "is {len} bytes, more than the {MAX_INDEX_BYTES} an index of any real model takes"
            )));
        }
        let text = std::fs::read_to_string(index).map_err(|e| Error::io(index, e))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let map = json
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| bad("has no weight_map object".into()))?;
        let mut shard_names: Vec<&str> = Vec::new();
        let mut wanted: Vec<(&str, &str)> = Vec::new();
        for (tensor, file) in map {
            let file = file
                .as_str()
                .ok_or_else(|| bad(format!("tensor {tensor} maps to {file}, not a file name")))?;
            let plain = Path::new(file)
                .file_name()
                .is_some_and(|n| n == std::ffi::OsStr::new(file));
            if !plain || file == ".." || file == "." {
                return Err(bad(format!(
                    "tensor {tensor} maps to {file:?}, which is not a file in this folder"
                )));
            }
            if !shard_names.contains(&file) {
                shard_names.push(file);
            }
            wanted.push((tensor, file));
        }
        let paths: Vec<PathBuf> = shard_names.iter().map(|f| dir.join(f)).collect();
        for p in &paths {
            if !p.is_file() {
                return Err(bad(format!(
                    "shard {} is missing; the download is incomplete",
                    p.display()
                )));
            }
        }
        let weights = Self::from_files(
            index.to_path_buf(),
            WeightFormat::Safetensors,
            &paths,
            config,
        )?;
        for (tensor, file) in wanted {
            let Some(name) = text_model_name(tensor) else {
                continue;
            };
            let ok = weights
                .tensors
                .get(&name)
                .is_some_and(|e| weights.files[e.file].path == dir.join(file));
            if !ok {
                return Err(Error::MissingTensor {
                    path: dir.join(file),
                    tensor: tensor.to_string(),
                });
            }
        }
        Ok(weights)
    }

    fn from_files(
        path: PathBuf,
        format: WeightFormat,
        paths: &[PathBuf],
        config: Option<ModelConfig>,
    ) -> Result<Self, Error> {
        let mut files = Vec::new();
        let mut tensors = BTreeMap::new();
        let mut skipped_vision = false;
        for (index, p) in paths.iter().enumerate() {
            let (map, header) = map_file(p)?;
            for TensorInfo {
                name,
                dtype,
                shape,
                range,
            } in header.tensors.iter().cloned()
            {
                let Some(name) = text_model_name(&name) else {
                    skipped_vision = true;
                    continue;
                };
                let entry = Entry {
                    file: index,
                    dtype,
                    shape,
                    range,
                    last_groups: GROUPS_PER_TILE,
                    gguf: None,
                    grouped: false,
                    owned: None,
                };
                if let Some(old) = tensors.insert(name.clone(), entry) {
                    return Err(Error::MalformedHeader {
                        path: p.clone(),
                        detail: format!("tensor {name} is also in {}", paths[old.file].display()),
                    });
                }
            }
            files.push(MappedFile {
                path: p.clone(),
                map,
                metadata: header.metadata,
                tensors: header.tensors,
                gguf_header: None,
            });
        }
        tracing::debug!(path = %path.display(), tensors = tensors.len(), "opened weights");
        Ok(Weights {
            path,
            format,
            files,
            tensors,
            config,
            skipped_vision,
        })
    }

    /// One tensor as a typed view. A missing tensor is an error naming it and the file.
    /// A name `model.X` also finds a tensor stored as `X` (see [`Weights::lookup`]).
    pub fn get(&self, name: &str) -> Result<Tensor<'_>, Error> {
        let (key, entry) = self.lookup(name).ok_or_else(|| Error::MissingTensor {
            path: self.path.clone(),
            tensor: name.to_string(),
        })?;
        let file = &self.files[entry.file];
        // A tensor computed at open (an f32 norm, or tiles `flm` fused or re-signed).
        let bytes = match &entry.owned {
            Some(owned) => owned,
            None => &file.map[entry.range.clone()],
        };
        if let Some(kind) = entry.gguf {
            return Ok(Tensor::Gguf(GgufMatrix {
                name: key,
                kind,
                rows: entry.shape[0],
                cols: entry.shape[1],
                bytes,
                grouped: entry.grouped,
            }));
        }
        let tile_bytes = entry.shape.last().copied().unwrap_or(0);
        let tiled = entry.dtype == Dtype::I8
            && matches!(entry.shape.len(), 2 | 3)
            && matches!(
                tile_bytes,
                Q4_1_TILE_BYTES | Q8_TILE_BYTES | Q4_K_TILE_BYTES
            );
        if !tiled {
            return Ok(Tensor::Dense(DenseTensor {
                name: key,
                dtype: entry.dtype,
                shape: entry.shape.clone(),
                bytes,
            }));
        }
        let wrong = |expected: String, found: String| Error::WrongTensor {
            path: file.path.clone(),
            tensor: name.to_string(),
            expected,
            found,
        };
        if tile_bytes == Q4_K_TILE_BYTES {
            return Err(wrong(
                "Q4_1 (5120-byte) or Q8 (8704-byte) tiles".into(),
                "Q4_K tiles (4736 bytes), which Hearth does not support yet".into(),
            ));
        }
        let (rows, cols) = self.tile_geometry(name, entry, &file.metadata, &file.path)?;
        if rows % TILE_ROWS != 0 {
            return Err(wrong(
                "a row count N that is a multiple of 32".into(),
                format!("N = {rows}"),
            ));
        }
        let tiles = (rows / TILE_ROWS).checked_mul(cols / TILE_COLS);
        let found_tiles = entry.shape[..entry.shape.len() - 1]
            .iter()
            .product::<usize>();
        if tiles != Some(found_tiles) {
            let tiles = tiles.map_or_else(|| "more than 2^64".into(), |t| t.to_string());
            return Err(wrong(
                format!("{tiles} tiles for [{rows} x {cols}] (K padded to 256)"),
                format!("{found_tiles} tiles (shape {:?})", entry.shape),
            ));
        }
        let matrix = TileMatrix {
            name: key,
            rows,
            cols,
            last_groups: entry.last_groups,
            bytes,
        };
        Ok(if tile_bytes == Q8_TILE_BYTES {
            Tensor::Q8(matrix)
        } else {
            Tensor::Q4_1(matrix)
        })
    }

    /// The logical K of a tiled tensor, where its metadata or the config says it (a 3-D shape
    /// gives only the padded K).
    fn logical_cols(&self, name: &str, metadata: &BTreeMap<String, String>) -> Option<usize> {
        if let Some(text) = metadata.get(&format!("{SHAPE_KEY_PREFIX}{name}")) {
            return text.split_once(',')?.1.trim().parse().ok();
        }
        self.config
            .as_ref()
            .and_then(|c| linear_shape(c, name))
            .map(|[_, k]| k)
    }

    /// Regroups in 8 rows ([`crate::gguf::rows8`]) every Q4_K, Q6_K and MXFP4 matrix of file `index`
    /// in `copy` whose rows are a multiple of 8. A range that two names share (a tied head) is
    /// regrouped once; one that partly overlaps another is left as it is.
    fn group_rows8(&mut self, index: usize, copy: &mut [u8]) {
        let groups =
            |e: &Entry| e.file == index && e.owned.is_none() && e.gguf.is_some_and(rows8::groups);
        let mut matrices: Vec<(Range<usize>, GgmlType, usize, usize)> = self
            .tensors
            .values()
            .filter(|e| groups(e))
            .filter_map(|e| Some((e.range.clone(), e.gguf?, e.shape[0], e.shape[1])))
            .filter(|(range, kind, rows, cols)| {
                rows.is_multiple_of(rows8::ROWS)
                    && cols.is_multiple_of(kind.block_len())
                    && range.len() == rows * kind.bytes_for(*cols)
            })
            .collect();
        matrices.sort_by_key(|(range, ..)| (range.start, range.end));
        matrices.dedup();
        // Sorted by start, a range overlaps another iff it starts before the furthest end of
        // those before it, or the next one starts before its end (two names of one range in two
        // kinds count as overlapping).
        let mut grouped = Vec::new();
        let mut furthest = 0;
        for (i, (range, kind, rows, cols)) in matrices.iter().enumerate() {
            let before = furthest > range.start;
            let after = matrices
                .get(i + 1)
                .is_some_and(|next| next.0.start < range.end);
            furthest = furthest.max(range.end);
            if !before && !after && range.end <= copy.len() {
                rows8::interleave_matrix(*kind, &mut copy[range.clone()], *rows, *cols);
                grouped.push((range.start, range.end));
            }
        }
        for entry in self.tensors.values_mut() {
            if groups(entry) {
                let key = (entry.range.start, entry.range.end);
                entry.grouped = grouped.binary_search(&key).is_ok();
            }
        }
    }

    /// Narrows, inside `copy` (a copy of file `index`), every tiled tensor whose K is padded
    /// to whole tiles: the last tile of each row block keeps only the groups of real columns
    /// ([`crate::tile::TileLayout`]), so the kernels stream each matrix front to back with no
    /// gaps (with the padding skipped inside whole tiles, SmolLM2-135M's 2-thread decode step
    /// took 12% longer). Tensors whose geometry is unknown or wrong stay as they are;
    /// [`Weights::get`] reports them.
    fn narrow_padded_tiles(&mut self, index: usize, copy: &mut [u8]) {
        let metadata = &self.files[index].metadata;
        let mut narrowed = Vec::new();
        for (name, entry) in self
            .tensors
            .iter()
            .filter(|(_, e)| e.file == index && e.owned.is_none())
        {
            let tile_bytes = entry.shape.last().copied().unwrap_or(0);
            let q8 = tile_bytes == Q8_TILE_BYTES;
            if entry.dtype != Dtype::I8 || !(q8 || tile_bytes == Q4_1_TILE_BYTES) {
                continue;
            }
            let (Ok((rows, cols)), Some(k)) = (
                self.tile_geometry(name, entry, metadata, &self.files[index].path),
                self.logical_cols(name, metadata),
            ) else {
                continue;
            };
            let (row_blocks, col_tiles) = (rows / TILE_ROWS, cols / TILE_COLS);
            let groups = k.div_ceil(GROUP);
            let fits = padded_cols(k) == cols
                && row_blocks * TILE_ROWS == rows
                && entry.range.len() == row_blocks * col_tiles * tile_bytes;
            let last_groups = groups.saturating_sub((col_tiles.max(1) - 1) * GROUPS_PER_TILE);
            if !fits || col_tiles == 0 || last_groups >= GROUPS_PER_TILE {
                continue;
            }
            let pieces = narrow_pieces(q8, last_groups);
            let whole_tiles = (col_tiles - 1) * tile_bytes;
            let (mut from, mut to) = (entry.range.start, entry.range.start);
            for _ in 0..row_blocks {
                // Every part moves to an offset at or below its own: the moves never overwrite
                // a byte that a later move still reads.
                copy.copy_within(from..from + whole_tiles, to);
                to += whole_tiles;
                for &(at, len) in &pieces {
                    let at = from + whole_tiles + at;
                    copy.copy_within(at..at + len, to);
                    to += len;
                }
                from += col_tiles * tile_bytes;
            }
            narrowed.push((name.clone(), entry.range.start..to, last_groups));
        }
        for (name, range, last_groups) in narrowed {
            if let Some(entry) = self.tensors.get_mut(&name) {
                (entry.range, entry.last_groups) = (range, last_groups);
            }
        }
    }

    /// `(N, K padded)` of a tiled tensor: from a 3-D shape, from Hearth's metadata, or from
    /// the config.
    fn tile_geometry(
        &self,
        name: &str,
        entry: &Entry,
        metadata: &BTreeMap<String, String>,
        path: &Path,
    ) -> Result<(usize, usize), Error> {
        if let [row_blocks, col_tiles, _] = entry.shape[..] {
            return Ok((row_blocks * TILE_ROWS, col_tiles * TILE_COLS));
        }
        if let Some(text) = metadata.get(&format!("{SHAPE_KEY_PREFIX}{name}")) {
            // Bounded so that padding and tile counts cannot overflow.
            let parsed = text
                .split_once(',')
                .and_then(|(n, k)| Some((n.trim().parse().ok()?, k.trim().parse().ok()?)))
                .filter(|&(n, k): &(usize, usize)| n <= MAX_DIM && k <= MAX_DIM);
            return match parsed {
                Some((n, k)) => Ok((n, padded_cols(k))),
                None => Err(Error::MalformedHeader {
                    path: path.to_path_buf(),
                    detail: format!("metadata {SHAPE_KEY_PREFIX}{name} is {text:?}, not \"N,K\""),
                }),
            };
        }
        match self.config.as_ref().and_then(|c| linear_shape(c, name)) {
            Some([n, k]) => Ok((n, padded_cols(k))),
            None => Err(Error::WrongTensor {
                path: path.to_path_buf(),
                tensor: name.to_string(),
                expected: "a linear weight that config.json describes (to know its N and K)".into(),
                found: format!(
                    "tiles of shape {:?} and {}",
                    entry.shape,
                    if self.config.is_some() {
                        "a name config.json does not imply"
                    } else {
                        "no config.json"
                    }
                ),
            }),
        }
    }

    /// Names of all tensors, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.keys().map(String::as_str).collect()
    }

    /// Whether the files held a multimodal model's vision tower or projector, which were left
    /// out: the model reads text only.
    pub fn skipped_vision(&self) -> bool {
        self.skipped_vision
    }

    /// Whether a tensor of that name exists (`model.X` also as `X`).
    pub fn contains(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    /// The tensor stored as `name` or, for a name `model.X`, as `X`: a checkpoint saved from a
    /// base model class (`Qwen3Model`, as Qwen3-Embedding is) names its tensors without the
    /// `model.` prefix its causal-LM class (`Qwen3ForCausalLM`) gives them.
    fn lookup(&self, name: &str) -> Option<(&String, &Entry)> {
        self.tensors.get_key_value(name).or_else(|| {
            let bare = name.strip_prefix("model.")?;
            self.tensors.get_key_value(bare)
        })
    }

    /// Tells the kernel these maps are about to be streamed for inference: read them ahead (the
    /// first token waits on every page) and back them with huge pages where the file system
    /// supports it (fewer TLB misses per token). Advice only, so failures are ignored; readers
    /// that only look at headers should not call it.
    pub fn advise_streaming(&self) {
        #[cfg(target_os = "linux")]
        for file in &self.files {
            let _ = file.map.advise(memmap2::Advice::WillNeed);
            let _ = file.map.advise(memmap2::Advice::HugePage);
        }
    }

    /// Replaces every file's map with a copy of the file read into anonymous memory that asks
    /// for 2 MiB pages. Streaming the weights once per token then misses the TLB 512 times less
    /// often than through the page cache's 4 KiB pages, where the hardware prefetchers also
    /// stop at every page. Costs: the read at load, and memory the kernel cannot drop and
    /// re-read under pressure (the caller decides whether it fits). A file that is shorter than
    /// when it was opened, or whose header changed, is an error; on any error the maps stay.
    ///
    /// In the copy, each tile matrix whose K is padded to whole tiles is narrowed (see
    /// [`TileMatrix::last_groups`]): the same values, without the zero columns; and each GGUF
    /// Q4_K, Q6_K and MXFP4 matrix is regrouped in 8 rows ([`GgufMatrix::grouped`]), the layout whose
    /// kernels need no horizontal sums.
    pub fn copy_into_huge_pages(&mut self) -> Result<(), Error> {
        let mut copies = Vec::with_capacity(self.files.len());
        for file in &self.files {
            let copy = read_into_huge_pages(&file.path, file.map.len())?;
            if let Some(header) = file.gguf_header {
                // A GGUF's tensors were found through its header: the same bytes, the same
                // tensors.
                if copy[..header] != file.map[..header] {
                    return Err(gguf::changed_while_loading(&file.path));
                }
                copies.push(copy);
                continue;
            }
            // What the tensors' checked ranges describe must be what was read.
            let header = container::parse(&copy, &file.path)?;
            let same = header.metadata == file.metadata && header.tensors == file.tensors;
            if !same {
                return Err(Error::MalformedHeader {
                    path: file.path.clone(),
                    detail: "the header changed while the model was loading; load the model again"
                        .into(),
                });
            }
            copies.push(copy);
        }
        let mut maps = Vec::with_capacity(copies.len());
        for (index, mut copy) in copies.into_iter().enumerate() {
            self.narrow_padded_tiles(index, &mut copy);
            self.group_rows8(index, &mut copy);
            let path = &self.files[index].path;
            maps.push(copy.make_read_only().map_err(|e| Error::io(path, e))?);
        }
        for (file, map) in self.files.iter_mut().zip(maps) {
            file.map = map;
        }
        Ok(())
    }

    /// Which container the weights came from.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The weights file (or the shard index).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The config read beside the weights, if there was one.
    pub fn config(&self) -> Option<&ModelConfig> {
        self.config.as_ref()
    }

    /// Total bytes of tensor data (for a GGUF, of the tensors the model reads).
    pub fn data_bytes(&self) -> u64 {
        self.tensors
            .values()
            .map(|e| e.owned.as_ref().map_or(e.range.len(), |o| o.len()) as u64)
            .sum()
    }

    /// The file, byte range, dtype and stored shape of a tensor, for streaming reads that
    /// should not grow the process's resident memory through the map.
    pub(crate) fn locate(&self, name: &str) -> Option<(&Path, Range<usize>, Dtype, &[usize])> {
        let e = self.tensors.get(name).filter(|e| e.owned.is_none())?;
        Some((&self.files[e.file].path, e.range.clone(), e.dtype, &e.shape))
    }
}

/// Maps a file read-only and parses its header.
/// The name a tensor has in the text model, or None for a part Hearth does not run. A
/// multimodal Gemma 3 (`Gemma3ForConditionalGeneration`) stores its language model as
/// `language_model.model.X` and `language_model.lm_head.weight` (transformers 5 saves
/// `model.language_model.X`), beside `vision_tower.*` and `multi_modal_projector.*`: the
/// language model's tensors are named as a `Gemma3ForCausalLM` names them, the others left out.
fn text_model_name(name: &str) -> Option<String> {
    let inner = name.strip_prefix("model.").unwrap_or(name);
    if inner.starts_with("vision_tower.") || inner.starts_with("multi_modal_projector.") {
        return None;
    }
    Some(if let Some(rest) = name.strip_prefix("language_model.") {
        rest.to_string()
    } else if let Some(rest) = name.strip_prefix("model.language_model.") {
        format!("model.{rest}")
    } else {
        name.to_string()
    })
}

fn map_file(path: &Path) -> Result<(Mmap, container::Header), Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len < 8 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            detail: format!(
                "the file is {len} bytes, a safetensors file starts with an 8-byte header length"
            ),
        });
    }
    // SAFETY: the map is read-only and private, and every slice we hand out is checked against
    // the length of the file as it was when mapped. Another process could still truncate or
    // rewrite the file underneath us, which would show as changed bytes or a SIGBUS; Hearth
    // itself never writes a model file in place (it writes a new file and renames it over the
    // old one, so an existing map keeps the old inode), and the model store is ours alone.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let header = container::parse(&map, path)?;
    Ok((map, header))
}

/// The `len` bytes of `path` (its length when it was opened) read into a new anonymous map
/// advised for huge pages.
fn read_into_huge_pages(path: &Path, len: usize) -> Result<memmap2::MmapMut, Error> {
    let mut copy = memmap2::MmapMut::map_anon(len).map_err(|e| Error::io(path, e))?;
    #[cfg(target_os = "linux")]
    let _ = copy.advise(memmap2::Advice::HugePage);
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // Large reads, so the kernel reads ahead; not one huge one, so a signal cannot stall it long.
    const CHUNK: usize = 64 << 20;
    let mut done = 0;
    while done < len {
        let end = len.min(done + CHUNK);
        match file.read_at(&mut copy[done..end], done as u64) {
            Ok(0) => {
                return Err(Error::Truncated {
                    path: path.to_path_buf(),
                    detail: format!(
                        "the file became {done} bytes long while it was loading (it was {len}); \
                         something else changed it: load the model again"
                    ),
                })
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(copy)
}

mod flm;
mod gguf;
#[cfg(test)]
mod tests;

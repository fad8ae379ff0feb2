//! Hearth's models: the catalog of known models, Hugging Face downloads that resume and
//! verify, and the local store whose registry (`model_list.json`) FastFlowLM can read too.
//!
//! ```no_run
//! use hearth_hub::{pull, DownloadControl, DownloadOptions, HubClient, PullRequest, Store};
//! # let data_folder = std::path::PathBuf::from("hearth-data");
//! let store = Store::at(data_folder); // the app's `Home` gives $XDG_DATA_HOME/hearth
//! let client = HubClient::from_env(false);
//! let request = PullRequest { query: "minicpm5-2b".into(), ..Default::default() };
//! let outcome = pull(&store, &client, &request, &DownloadOptions::default(),
//!                    &DownloadControl::new(), &mut |p| eprintln!("{:?}", p))?;
//! # Ok::<(), hearth_hub::Error>(())
//! ```
//!
//! Why not the `hf-hub` crate: 0.4 resumes only within one process and keeps files in its own
//! cache layout, has no stall detection or pause, does not verify sha256 and ignores
//! `HF_ENDPOINT` with `Api::new()`; 1.0 drops resume and brings about 290 dependencies. The
//! three Hub endpoints needed are small, so `hub_api` talks to them over `ureq` directly.

mod builtin;
pub mod catalog;
mod download;
mod error;
mod found;
mod fsutil;
pub use fsutil::{dir_size, write_atomic};
mod gguf_import;
mod gguf_link;
mod hub_api;
pub mod kernels;
mod link_state;
mod machine;
mod model_dir;
mod names;
mod progress;
mod pull;
pub mod registry;
mod sizes;
pub mod speech;
mod store;
pub mod voices;

pub use builtin::{
    find_builtin_model, BuiltinKind, BuiltinModel, DEMO_MODEL_NAME, STARTER_MARKER,
    STARTER_MODEL_NAME, WEIGHTS_SHA256_FILE,
};
pub use catalog::{Backend, CatalogEntry, ModelKind, PinnedFile, DEFAULT_SPEECH_MODEL};
pub use download::{sha256_file, DownloadOptions};
pub use error::{Error, Result};
pub use found::{
    import_found, scan as scan_found, FoundFormat, FoundModel, FoundRoots, FoundSource,
};
pub use gguf_import::{gguf_magic, is_gguf_file, name_from_file, GgufImportOptions};
pub use gguf_link::LINK_FILE;
pub use hub_api::HubClient;
pub use kernels::{kernel_status, KernelStatus};
pub use link_state::{LinkState, LinkStatus};
pub use machine::{catalog_view, CatalogItem, Fit, Machine};
pub use model_dir::WeightFormat;
pub use progress::{DownloadControl, Phase, Progress, Request};
pub use pull::{pull, target_name, PullOutcome, PullRequest};
pub use registry::LinkedFile;
pub use sizes::human_bytes;
pub use store::{ImportOptions, InstalledModel, ModelCheck, PartialDownload, Removed, Store};

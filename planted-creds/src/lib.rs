//! Canary credentials: per-run unique secrets in the formats real services issue, and the registry
//! that recognises them (whole or in part) wherever they show up.
//!
//! ```no_run
//! use planted_creds::{generate, Flavor, Persona, Seed};
//! # fn persona() -> Persona { unimplemented!() }
//! let seed = Seed::random().unwrap();
//! let planted = generate(&seed, &persona(), 1_750_000_000).unwrap();
//! let key = &planted.files["ssh/id_ed25519"];
//! assert!(planted.registry.lookup(std::str::from_utf8(&key.bytes).unwrap()).is_some());
//! ```

mod browser;
mod cloud;
pub mod der;
mod dev;
pub mod gen;
mod keychain;
mod plant;
pub mod registry;
pub mod rsakey;
mod seed;
mod ssh;
pub mod time;

pub use gen::{find_tell, Gen, TELL_WORDS};
pub use keychain::FIELD_SEP as KEYCHAIN_FIELD_SEP;
pub use plant::{
    generate, Flavor, KeychainClass, KeychainItem, Persona, PlantError, Planted, PlantedEnv,
    PlantedFile,
};
pub use registry::{
    host_matches, CredentialRecord, Hit, Location, Needle, NeedleView, Part, Registry,
    RegistryError, MIN_NEEDLE,
};
pub use seed::{Seed, SeedError};

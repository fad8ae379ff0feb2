//! Why listening to the microphone failed, each case its own variant in plain words saying what
//! happened and what the person can do. The front end shows them beside the microphone button.

/// Everything capturing from the microphone can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The system has no microphone (or no sound system Hearth can reach).
    #[error("No microphone was found: plug one in (or switch it on in the system's sound settings) and try again.")]
    NoMicrophone,
    /// Another program holds the microphone.
    #[error("The microphone \"{device}\" is in use by another program: close that program (or end its call) and try again.")]
    Busy {
        /// The device's name.
        device: String,
    },
    /// The system refused Hearth the microphone.
    #[error("Hearth was not allowed to use the microphone \"{device}\": allow it in the system's privacy or sound settings (on Linux, your user may need to be in the \"audio\" group), then try again.")]
    PermissionRefused {
        /// The device's name.
        device: String,
    },
    /// Nothing louder than the floor was heard.
    #[error("Nothing was heard: the loudest moment was {loudest_dbfs:.0} dBFS, below {floor_dbfs:.0} dBFS. Check that the microphone is not muted and speak closer to it.")]
    Silence {
        /// The loudest 100 ms, in dBFS.
        loudest_dbfs: f32,
        /// The floor, in dBFS.
        floor_dbfs: f32,
    },
    /// The device gives sound in a form Hearth cannot take.
    #[error("The microphone \"{device}\" cannot be used: {detail}.")]
    Unsupported {
        /// The device's name.
        device: String,
        /// What it offers.
        detail: String,
    },
    /// The device stopped working while recording (unplugged, the sound system restarted).
    #[error("The microphone stopped while recording ({detail}): check that it is still connected and try again.")]
    Lost {
        /// What the sound system said.
        detail: String,
    },
    /// Any other failure of the sound system.
    #[error("The microphone could not be opened: {detail}. Check the system's sound settings and try again.")]
    Device {
        /// What the sound system said.
        detail: String,
    },
    /// The recording that stands in for the microphone in tests could not be read.
    #[error("The test recording {path} {error}")]
    TestRecording {
        /// The file.
        path: String,
        /// Why.
        error: crate::Error,
    },
}

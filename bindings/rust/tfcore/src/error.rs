//! Errors: a failed tfc_status with the thread's tfc_last_error() message.
use std::ffi::CStr;
use std::fmt;

use tfcore_sys as sys;

/// A failed call: `status` is the C status code (`sys::TFC_ERR_*`), and
/// `message` the library's explanation naming the function, the argument
/// and the shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: sys::tfc_status,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Static name of the status, e.g. "TFC_ERR_SHAPE".
    pub fn status_name(&self) -> &'static str {
        unsafe { CStr::from_ptr(sys::tfc_status_name(self.status)) }.to_str().unwrap_or("?")
    }

    /// An error raised by this crate itself (a precondition the C API cannot see).
    pub(crate) fn new(status: sys::tfc_status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.status_name())
    }
}

impl std::error::Error for Error {}

/// Ok(()) for TFC_OK, else the error with this thread's last message.
pub(crate) fn check(status: sys::tfc_status) -> Result<()> {
    if status == sys::TFC_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(sys::tfc_last_error()) }.to_string_lossy().into_owned();
    Err(Error { status, message })
}

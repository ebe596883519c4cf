//! The generated declarations link and agree with the library they load.
use tfcore_sys::*;

#[test]
fn version_matches_header() {
    let v = unsafe { tfc_version() };
    assert_eq!(v, TFC_VERSION_NUMBER);
    let name = unsafe { core::ffi::CStr::from_ptr(tfc_status_name(TFC_ERR_SHAPE)) };
    assert_eq!(name.to_str().unwrap(), "TFC_ERR_SHAPE");
}

#[test]
fn raw_tensor_roundtrip_and_error() {
    unsafe {
        let dims = [2i64, 3];
        let mut t: *mut tfc_tensor = core::ptr::null_mut();
        assert_eq!(tfc_tensor_full(dims.as_ptr(), 2, TFC_DTYPE_F64, 1.5, &mut t), TFC_OK);
        assert_eq!(tfc_tensor_numel(t), 6);
        let mut out = [0f64; 6];
        assert_eq!(tfc_tensor_copy_to_host(t, out.as_mut_ptr().cast(), 48), TFC_OK);
        assert_eq!(out, [1.5; 6]);
        // too small a buffer: an error, the message names the function
        assert_eq!(tfc_tensor_copy_to_host(t, out.as_mut_ptr().cast(), 8), TFC_ERR_BUFFER_TOO_SMALL);
        let msg = core::ffi::CStr::from_ptr(tfc_last_error()).to_string_lossy().into_owned();
        assert!(msg.contains("tfc_tensor_copy_to_host"), "{msg}");
        tfc_tensor_release(t);
    }
}

#[test]
fn dlpack_struct_layouts_match_the_c_abi() {
    // x86-64/aarch64 LP64 layouts of the DLPack structs (dlpack.h)
    use core::mem::{offset_of, size_of};
    assert_eq!(size_of::<DLDevice>(), 8);
    assert_eq!(size_of::<DLDataType>(), 4);
    assert_eq!(size_of::<DLTensor>(), 48);
    assert_eq!(offset_of!(DLTensor, shape), 24);
    assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    assert_eq!(size_of::<DLManagedTensor>(), 64);
    assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
}

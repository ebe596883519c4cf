#!/bin/bash
# run_mpi.sh NP PROGRAM [ARGS...]: PROGRAM under `mpirun -np NP` as CI runs
# it — as root where it must (Open MPI refuses root unless told: the two
# OMPI_ALLOW_RUN_AS_ROOT variables), oversubscribed (NP may exceed the
# cores), over shared memory and loopback TCP only. NP 0 runs PROGRAM
# plainly (no launcher: the one-rank communicator).
set -u
np=$1
shift
if [ "$np" = 0 ]; then exec "$@"; fi
if ! command -v mpirun >/dev/null; then
  echo "run_mpi.sh: mpirun not found: install OpenMPI (apt-get install openmpi-bin libopenmpi-dev; scripts/setup.sh does)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No InfiniBand/UCX probing on machines without it (their warnings are noise), no 'vader' CMA needs.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# Under the sanitizer build: Open MPI's own never-freed allocations are not ours to report.
# Open MPI unloads its plugins at MPI_Finalize, which would leave their frames
# unnamed ("<unknown module>"): keep them loaded, and unwind slowly (libc's
# vasprintf has no frame pointers), so every such stack shows its library.
if [ -n "${ASAN_OPTIONS:-}" ]; then
  export OMPI_MCA_mca_base_component_disable_dlclose=1 ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
  export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-mpi.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
exec mpirun --oversubscribe --bind-to none -np "$np" "$@"

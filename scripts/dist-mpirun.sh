#!/bin/sh
# mpirun - Open MPI's launcher as the relocatable ctrain tarball carries it (`make
# dist`; this file is made from scripts/dist-mpirun.sh):
#
#   DIR/bin/mpirun -np 4 DIR/bin/ctrain train MODEL ...
#
# Open MPI finds its plug-ins, help texts and settings through the folders it was
# configured with (/usr/... on the machine that built the tarball). This launcher
# points them into the tarball (OPAL_* for Open MPI, PMIX_* for PMIx, its process
# manager) and runs Open MPI @OMPI_VERSION@'s orterun from mpi/bin/; the ranks
# inherit that environment, so bin/ctrain's MPI library finds the same plug-ins.
# It starts ranks on this machine; across machines use the cluster's own MPI with
# a ctrain built against it (docs/distributed.md).
set -u
self=$0
if r=$(readlink -f -- "$0" 2>/dev/null) && [ -n "$r" ]; then self=$r; fi
root=$(cd "$(dirname -- "$self")/.." 2>/dev/null && pwd -P) || {
  echo "mpirun: cannot find the tarball's folder from $0; run it as DIR/bin/mpirun" >&2; exit 127; }
m=$root/mpi
[ -x "$m/bin/orterun" ] || { echo "mpirun: $m/bin/orterun is missing; extract the whole tarball again" >&2; exit 127; }
OPAL_PREFIX=$m OPAL_EXEC_PREFIX=$m OPAL_BINDIR=$m/bin OPAL_LIBDIR=$root/lib OPAL_PKGLIBDIR=$m/lib/openmpi
OPAL_DATADIR=$m/share OPAL_PKGDATADIR=$m/share/openmpi OPAL_SYSCONFDIR=$m/etc
export OPAL_PREFIX OPAL_EXEC_PREFIX OPAL_BINDIR OPAL_LIBDIR OPAL_PKGLIBDIR OPAL_DATADIR OPAL_PKGDATADIR OPAL_SYSCONFDIR
PMIX_PREFIX=$m PMIX_EXEC_PREFIX=$m PMIX_BINDIR=$m/bin PMIX_LIBDIR=$root/lib PMIX_PKGLIBDIR=$m/lib/pmix
PMIX_DATADIR=$m/share PMIX_PKGDATADIR=$m/share/pmix PMIX_SYSCONFDIR=$m/etc PMIX_MCA_mca_base_component_path=$m/lib/pmix
export PMIX_PREFIX PMIX_EXEC_PREFIX PMIX_BINDIR PMIX_LIBDIR PMIX_PKGLIBDIR PMIX_DATADIR PMIX_PKGDATADIR PMIX_SYSCONFDIR
export PMIX_MCA_mca_base_component_path
# hwloc (the machine's topology) loads no plug-ins from the building machine's folders
HWLOC_PLUGINS_PATH=$m/lib/hwloc
export HWLOC_PLUGINS_PATH
exec "$m/bin/orterun" "$@"

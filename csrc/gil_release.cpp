#include "gil_release.h"

namespace torchdata_s3 {

unsigned long g_main_thread = 0;

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

}  // namespace torchdata_s3

/* dtype.c - the names of the data types (see dtype.h). */
#include "core/dtype.h"

const char *ct_dtype_name(ct_dtype t)
{
    switch (t) {
    case CT_F32: return "float32";
    case CT_BF16: return "bfloat16";
    }
    return "unknown";
}

/* task.c - the names and fields that task.h declares for the training loop and the
 * checkpoints alike: the fields of an epoch's log (the CSV columns, the checkpoint's
 * /history datasets, TensorBoard's tags), the values a callback can monitor, and what
 * --on-nan may say. The training state on the model's device is in train_state.c. */
#include <stddef.h>
#include <string.h>
#include "train/task.h"

/* ---- the fields of an epoch's log (task.h) ---- */
#define FIELD(m) #m, offsetof(ct_epoch_log, m)
const ct_epoch_field ct_epoch_fields[CT_EPOCH_FIELDS] = {
    { FIELD(loss), "loss", 0 },
    { FIELD(accuracy), "accuracy", 0 },
    { FIELD(val_loss), "val_loss", CT_EPOCH_VAL },
    { FIELD(val_accuracy), "val_accuracy", CT_EPOCH_VAL },
    { FIELD(val_eer), "val_eer", CT_EPOCH_VAL | CT_EPOCH_OPTIONAL },
    { FIELD(seconds), "epoch_seconds", CT_EPOCH_TIME },
    { FIELD(train_seconds), NULL, CT_EPOCH_TIME },
    { FIELD(val_seconds), NULL, CT_EPOCH_TIME },
};
#undef FIELD

/* ---- monitored values (Keras's ModelCheckpoint / EarlyStopping "monitor") ---- */
static const char *MONITOR_NAMES[] = { "val_loss", "val_accuracy", "val_eer", "loss", "accuracy" };

ct_status ct_monitor_parse(ct_monitor *m, const char *name)
{
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, MONITOR_NAMES[i])) { *m = (ct_monitor)i; return CT_OK; }
    return ct_fail(CT_EINVAL, "--monitor %s: use val_loss, val_accuracy, val_eer, loss or accuracy", name);
}

const char *ct_monitor_name(ct_monitor m) { return (int)m >= 0 && (int)m < 5 ? MONITOR_NAMES[m] : "val_loss"; }

ct_status ct_on_nan_parse(ct_on_nan *m, const char *name)
{
    if (!strcmp(name, "stop")) *m = CT_NAN_STOP;
    else if (!strcmp(name, "skip-batch")) *m = CT_NAN_SKIP_BATCH;
    else return ct_fail(CT_EINVAL, "--on-nan %s: use stop or skip-batch", name);
    return CT_OK;
}

/* json.c - the json fuzz target: `ctrain time --compare FILE --html PAGE`, through the
 * function the command calls (cli/time.h), so the target follows the reader whatever
 * parses the JSON underneath, and the report page is written from whatever it accepted.
 * Linked with cli/ in the fuzz build only (see targets.h). */
#include "tests/fuzz/targets.h"
#include "cli/time.h"

#include <stdio.h>

int fuzz_json(const char *path, const char *tmp)
{
    char *paths[1] = { (char *)path };
    char page[512];
    snprintf(page, sizeof page, "%s/report.html", tmp);
    int rc = time_compare(1, paths, page);
    return fuzz_check(rc == 0 ? CT_OK : CT_EFORMAT, path);
}

/* json.c - the json fuzz target: `ctrain time --compare FILE`, through the function
 * the command calls (cli/time.h), so the target follows the reader whatever parses
 * the JSON underneath. Linked with cli/ in the fuzz build only (see targets.h). */
#include "tests/fuzz/targets.h"
#include "cli/time.h"

int fuzz_json(const char *path, const char *tmp)
{
    char *paths[1] = { (char *)path };
    int rc = time_compare(1, paths);
    return fuzz_check(rc == 0 ? CT_OK : CT_EFORMAT, path);
}

/* Must NOT compile: a program that links t4a::t4a sees t4a's installed headers only, never the
 * driver table behind them (scripts/check_consumers.sh builds it and expects the failure). */
#include "t4a_ctx/driver_table.h"

int main(void) { return 0; }

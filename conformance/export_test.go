package conformance

// CheckOnly runs only the cases named (see checkOnly).
var CheckOnly = checkOnly

package otellease

// HashName is hashName, for tests that check the hashed attributes.
var HashName = hashName

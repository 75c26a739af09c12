package db

// MigrateTo lets tests build the schema before a migration that carries
// data over.
var MigrateTo = migrateTo

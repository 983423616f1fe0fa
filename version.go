package radgen

// Version is the semantic version (https://semver.org) of the module
// github.com/radgen/radgen, the one source of it: the radgen command
// prints it (radgen version, radgen -version), the report service answers
// it in GET /v1/model (memtrans/serve, radgen_version), and the report
// writers name it as the software that wrote a report: Software Versions
// (0018,1020) and Implementation Version Name (0002,0013) of a DICOM SR
// (memtrans/dicomsr), a version of the FHIR Device (memtrans/fhir).
const Version = "1.0.0"

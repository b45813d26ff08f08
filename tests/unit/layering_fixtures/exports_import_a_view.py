# as: orchestrator.report.exports.leaky  breaks: report_sub_wings_import_downwards
def label(row):
    from orchestrator.report.view.problems import matrix  # a local import counts too

    return matrix

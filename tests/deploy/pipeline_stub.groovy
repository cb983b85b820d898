// Runs a declarative Jenkinsfile against a minimal stand-in for the Jenkins pipeline DSL and prints, as JSON, what it
// would do: every `sh` script, every `build` of another job, every archived pattern, the stages entered and skipped.
// usage: groovy pipeline_stub.groovy JENKINSFILE SCENARIO.json
// SCENARIO: {"params": {...overrides...}, "stdout": {"substring of an sh script": "what it prints"}}
// Only the steps perfdash's pipelines use are modelled; an unknown step with a closure runs the closure, one without
// returns null, so a typo in a step name is not caught here (groovyc and Jenkins' own linter are for that).
import groovy.json.JsonOutput
import groovy.json.JsonSlurper
import org.codehaus.groovy.control.CompilerConfiguration

class Record {
    List sh = []
    List builds = []
    List archived = []
    List stagesRun = []
    List stagesSkipped = []
    List echoes = []
    List credentials = []
    List bindings = []
    Map agents = [:]
    Map params = [:]
    Map scenario = [:]
    Map env = [:]
}

class Placeholder {
    String name
    String toString() { name }
}

class WhenSpec {
    List<Closure> expressions = []
    def expression(Closure c) { expressions << c }
    def beforeAgent(value) {}
}

class StageSpec {
    PipelineScript script
    Map<String, Closure> parts = [:]
    def agent(Closure c) { parts.agent = c }
    def when(Closure c) { parts.when = c }
    def options(Closure c) { parts.options = c }
    def steps(Closure c) { parts.steps = c }
    def post(Closure c) { parts.post = c }
    def methodMissing(String name, args) { script.invokeMethod(name, args) }
    def propertyMissing(String name) { script.getProperty(name) }
}

class AgentSpec {
    PipelineScript script
    String label
    def label(value) { this.label = value.toString() }
    def methodMissing(String name, args) { null }
    def propertyMissing(String name) { script.getProperty(name) }
}

class PostSpec {
    Map<String, Closure> conditions = [:]
    def methodMissing(String name, args) { conditions[name] = args[-1] }
}

class EnvSpec {
    PipelineScript script
    def propertyMissing(String name) { script.getProperty(name) }
    def propertyMissing(String name, value) { script.record.env[name] = "${value}".toString() }
}

class DockerImage {
    PipelineScript script
    String tag
    def inside(String args = '', Closure body) {
        script.record.echoes << "inside ${tag} ${args}".toString()
        body.call()
    }
}

abstract class PipelineScript extends Script {
    Record record
    boolean inParameters = false

    def getParams() { record.params }
    def getEnv() { record.env }
    def getDocker() {
        [build: { String tag, String args -> record.echoes << "build ${tag} ${args}".toString(); new DockerImage(script: this, tag: tag) }]
    }
    def getScm() { 'scm' }
    def getCurrentBuild() { record.env.currentBuild = record.env.currentBuild ?: [:]; record.env.currentBuild }
    def getProperty(String name) {
        try {
            return super.getProperty(name)
        } catch (MissingPropertyException ignored) {
            return new Placeholder(name: name)  // `agent none`, `unit: MINUTES` and the like
        }
    }

    def pipeline(Closure body) { body.call() }
    def parameters(Closure body) { inParameters = true; body.call(); inParameters = false }
    def environment(Closure body) {
        body.delegate = new EnvSpec(script: this)
        body.resolveStrategy = Closure.DELEGATE_FIRST
        body.call()
    }
    def stages(Closure body) { body.call() }
    def post(Closure body) { def spec = new PostSpec(); body.delegate = spec; body.resolveStrategy = Closure.DELEGATE_FIRST; body.call(); spec.conditions.always?.call() }

    def stage(String name, Closure body) {
        def spec = new StageSpec(script: this)
        body.delegate = spec
        body.resolveStrategy = Closure.DELEGATE_FIRST
        body.call()
        if (!spec.parts.steps) {  // a scripted stage: its body already ran
            record.stagesRun << name
            return
        }
        if (spec.parts.when) {
            def when = new WhenSpec()
            spec.parts.when.delegate = when
            spec.parts.when.resolveStrategy = Closure.DELEGATE_FIRST
            spec.parts.when.call()
            if (!when.expressions.every { it.call() }) {
                record.stagesSkipped << name
                return
            }
        }
        record.stagesRun << name
        if (spec.parts.agent) {
            def agent = new AgentSpec(script: this)
            spec.parts.agent.delegate = agent
            spec.parts.agent.resolveStrategy = Closure.DELEGATE_FIRST
            spec.parts.agent.call()
            record.agents[name] = agent.label
        }
        spec.parts.steps.call()
        if (spec.parts.post) { post(spec.parts.post) }
    }

    def string(Map spec) {
        if (inParameters) { if (!record.params.containsKey(spec.name)) record.params[spec.name] = spec.defaultValue }
        return spec
    }
    def booleanParam(Map spec) {
        if (inParameters) { if (!record.params.containsKey(spec.name)) record.params[spec.name] = spec.defaultValue }
        return spec
    }
    def choice(Map spec) {
        if (inParameters) { if (!record.params.containsKey(spec.name)) record.params[spec.name] = spec.choices[0] }
        return spec
    }

    def sh(String script) { sh(script: script) }
    def sh(Map spec) {
        record.sh << spec.script.toString()
        def out = record.scenario.stdout?.find { key, value -> spec.script.toString().contains(key) }
        return spec.returnStdout ? (out ? out.value : '') : 0
    }
    def echo(message) { record.echoes << message.toString() }
    def error(String message) { throw new IllegalStateException(message) }
    def readJSON(Map spec) { new JsonSlurper().parseText(spec.text.toString()) }
    def writeJSON(Map spec) { record.echoes << "writeJSON ${spec.file} ${JsonOutput.toJson(spec.json)}".toString() }
    def build(Map spec) { record.builds << [job: spec.job, wait: spec.wait, parameters: spec.parameters.collectEntries { [(it.name): it.value] }] }
    def archiveArtifacts(Map spec) { record.archived << spec.artifacts.toString() }
    def parallel(Map branches) { branches.each { name, body -> if (body instanceof Closure) body.call() } }
    def file(Map spec) { spec + [kind: 'file'] }
    def withCredentials(List bindings, Closure body) {
        record.credentials.addAll(bindings*.credentialsId)
        record.bindings.addAll(bindings.collect { [id: it.credentialsId, variable: it.variable, kind: it.kind ?: 'string'] })
        body.call()
    }
    def withEnv(List vars, Closure body) { body.call() }

    def methodMissing(String name, args) {
        def list = args as List
        if (list && list[-1] instanceof Closure) { return list[-1].call() }
        return null
    }
}

def (jenkinsfile, scenarioFile) = args
def scenario = new JsonSlurper().parse(new File(scenarioFile))
def config = new CompilerConfiguration()
config.scriptBaseClass = PipelineScript.name
def shell = new GroovyShell(this.class.classLoader, new Binding(), config)
def script = shell.parse(new File(jenkinsfile))
def record = new Record(params: new LinkedHashMap(scenario.params ?: [:]), scenario: scenario,
                        env: [BUILD_URL: 'https://jenkins.example/job/perfdash/1/', BUILD_TAG: 'jenkins-perfdash-1'])
script.setRecord(record)
script.run()
record.env.remove('currentBuild')
println JsonOutput.toJson([sh: record.sh, builds: record.builds, archived: record.archived, stagesRun: record.stagesRun,
                           stagesSkipped: record.stagesSkipped, echoes: record.echoes, params: record.params,
                           credentials: record.credentials, bindings: record.bindings, env: record.env, agents: record.agents])
